"""IngestEnvelopeV1: accepted and rejected shapes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from butlers.switchboard.envelope import build_envelope, parse_envelope


def _envelope(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema_version": "ingest.v1",
        "source": {"channel": "telegram", "provider": "telegram"},
        "event": {"external_event_id": "42", "observed_at": "2026-11-22T10:00:00+00:00"},
        "sender": {"identity": "user-1"},
        "payload": {"text": "Log my weight: 80kg"},
        "control": {"idempotency_key": "tg:42"},
    }
    base.update(overrides)
    return base


def _field(exc: ValidationError) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}


def test_well_formed_envelope_is_accepted() -> None:
    envelope = parse_envelope(_envelope())
    assert envelope.payload.text == "Log my weight: 80kg"
    assert envelope.idempotency_key == "tg:42"


def test_wrong_schema_version_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        parse_envelope(_envelope(schema_version="ingest.v2"))
    assert "schema_version" in _field(info.value)


def test_invalid_channel_provider_pair_is_rejected() -> None:
    with pytest.raises(ValidationError, match="cannot deliver on channel 'telegram'"):
        parse_envelope(_envelope(source={"channel": "telegram", "provider": "gmail"}))


def test_naive_datetime_is_rejected() -> None:
    event = {"external_event_id": "1", "observed_at": "2026-11-22T10:00:00"}
    with pytest.raises(ValidationError) as info:
        parse_envelope(_envelope(event=event))
    assert "event.observed_at" in _field(info.value)


def test_extra_fields_are_rejected_at_any_level() -> None:
    with pytest.raises(ValidationError) as info:
        parse_envelope(_envelope(extra="x"))
    assert "extra" in _field(info.value)
    with pytest.raises(ValidationError) as info:
        parse_envelope(_envelope(payload={"text": "hi", "html": "<b>hi</b>"}))
    assert "payload.html" in _field(info.value)


def test_empty_text_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        parse_envelope(_envelope(payload={"text": ""}))
    assert "payload.text" in _field(info.value)


def test_idempotency_key_is_derived_from_the_event_when_absent() -> None:
    one = parse_envelope(_envelope(control={}))
    two = parse_envelope(_envelope(control={}))
    other = parse_envelope(
        _envelope(
            control={}, event={"external_event_id": "43", "observed_at": "2026-11-22T10:00:00Z"}
        )
    )
    assert one.idempotency_key == two.idempotency_key != other.idempotency_key


def test_build_envelope_makes_a_valid_cli_envelope() -> None:
    envelope = build_envelope("hello")
    assert parse_envelope(envelope.model_dump(mode="json")) == envelope
