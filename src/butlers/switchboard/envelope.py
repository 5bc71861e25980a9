"""`IngestEnvelopeV1`: the one shape in which messages enter the ecosystem.

Strict: unknown fields are rejected, datetimes must carry a timezone, the
channel/provider pair must be a known one, and the schema version is fixed.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, model_validator

SCHEMA_VERSION = "ingest.v1"

# Which providers may deliver on which channel.
CHANNEL_PROVIDERS: dict[str, frozenset[str]] = {
    "telegram": frozenset({"telegram"}),
    "email": frozenset({"gmail", "imap", "smtp"}),
    "api": frozenset({"http", "internal"}),
    "cli": frozenset({"butlers"}),
    "dashboard": frozenset({"web"}),
}

Channel = Literal["telegram", "email", "api", "cli", "dashboard"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SourceV1(_Strict):
    channel: Channel
    provider: Annotated[str, Field(min_length=1, max_length=64)]
    endpoint_identity: Annotated[str | None, Field(max_length=256)] = None


class EventV1(_Strict):
    external_event_id: Annotated[str, Field(min_length=1, max_length=256)]
    external_thread_id: Annotated[str | None, Field(max_length=256)] = None
    observed_at: AwareDatetime


class SenderV1(_Strict):
    identity: Annotated[str, Field(min_length=1, max_length=256)]
    display_name: Annotated[str | None, Field(max_length=256)] = None


class PayloadV1(_Strict):
    text: Annotated[str, Field(min_length=1, max_length=100_000)]
    raw: dict[str, JsonValue] | None = None


class ControlV1(_Strict):
    idempotency_key: Annotated[str | None, Field(min_length=1, max_length=256)] = None
    trace_context: dict[str, str] | None = None


class IngestEnvelopeV1(_Strict):
    schema_version: Literal["ingest.v1"]
    source: SourceV1
    event: EventV1
    sender: SenderV1
    payload: PayloadV1
    control: ControlV1 = Field(default_factory=ControlV1)

    @model_validator(mode="after")
    def _known_channel_provider(self) -> IngestEnvelopeV1:
        allowed = CHANNEL_PROVIDERS[self.source.channel]
        if self.source.provider not in allowed:
            raise ValueError(
                f"source.provider {self.source.provider!r} cannot deliver on channel "
                f"{self.source.channel!r} (allowed: {', '.join(sorted(allowed))})"
            )
        return self

    @property
    def idempotency_key(self) -> str:
        """The caller's key, or one derived from where the event came from (channel,
        provider, endpoint, sender, thread) and its id: providers number events per
        chat or mailbox, so the event id alone would let one sender's message swallow
        another's. Keys are also scoped to the authenticated caller (the inbox's
        `submitted_by`)."""
        if self.control.idempotency_key:
            return self.control.idempotency_key
        basis = json.dumps(
            [
                self.source.channel,
                self.source.provider,
                self.source.endpoint_identity,
                self.sender.identity,
                self.event.external_thread_id,
                self.event.external_event_id,
            ]
        )
        return "derived:" + hashlib.sha256(basis.encode()).hexdigest()[:32]

    def content_digest(self) -> str:
        """What a repeat with the same key must match: who said what, where (not when
        it was observed, nor its trace context)."""
        content = [
            self.source.channel,
            self.source.provider,
            self.source.endpoint_identity,
            self.sender.identity,
            self.payload.text,
            self.payload.raw,
        ]
        text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def parse_envelope(data: Any) -> IngestEnvelopeV1:
    """Validate JSON-shaped data (timestamps as ISO 8601 strings) strictly."""
    return IngestEnvelopeV1.model_validate_json(json.dumps(data, default=_iso))


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def build_envelope(
    text: str,
    *,
    channel: Channel = "cli",
    provider: str = "butlers",
    sender: str = "user",
    event_id: str | None = None,
    observed_at: datetime | None = None,
    idempotency_key: str | None = None,
) -> IngestEnvelopeV1:
    """An envelope for a message typed by a person (CLI, tests)."""
    import uuid
    from datetime import UTC

    return IngestEnvelopeV1(
        schema_version="ingest.v1",
        source=SourceV1(channel=channel, provider=provider),
        event=EventV1(
            external_event_id=event_id or str(uuid.uuid4()),
            observed_at=observed_at or datetime.now(UTC),
        ),
        sender=SenderV1(identity=sender),
        payload=PayloadV1(text=text),
        control=ControlV1(idempotency_key=idempotency_key),
    )
