"""Data contracts between pipeline stages, checked over the switchboard's MCP tools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, step

from .harness.ecosystem import EcosystemHandle


def _envelope(**changes: Any) -> dict[str, Any]:
    data = build_envelope("hello there", channel="telegram", provider="telegram").model_dump(
        mode="json"
    )
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        target = data
        for part in parents:
            target = target[part]
        target[leaf] = value
    return data


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"schema_version": "ingest.v2"}, "schema_version"),
        ({"source__provider": "gmail"}, "cannot deliver on channel 'telegram'"),
        ({"event__observed_at": "2026-11-22T10:00:00"}, "event.observed_at"),
        ({"surprise": 1}, "surprise"),
        ({"payload__html": "<b>hi</b>"}, "payload.html"),
        ({"payload__text": ""}, "payload.text"),
    ],
    ids=[
        "schema-version",
        "channel-provider",
        "naive-datetime",
        "extra-top",
        "extra-nested",
        "empty",
    ],
)
async def test_invalid_envelopes_are_rejected_naming_the_problem(
    butler_ecosystem: EcosystemHandle, changes: dict[str, Any], field: str
) -> None:
    result = await butler_ecosystem.call_raw(
        "switchboard", "ingest_v1", {"envelope": _envelope(**changes)}
    )
    assert result.is_error
    assert field in result.content[0].text
    pool = await butler_ecosystem.pool("switchboard")
    assert await pool.fetchval("SELECT count(*) FROM message_inbox WHERE text = 'hello there'") == 0


async def test_classification_contract_over_mcp(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    answer = [
        {"butler": "health", "prompt": "Log 80 kg", "segment": "80kg", "confidence": 0.9},
        {"butler": "astrology", "prompt": "stars", "segment": "stars"},
    ]
    llm_script.route("switchboard", step(json.dumps(answer)))
    result = await butler_ecosystem.call("switchboard", "classify_message", {"text": "80kg, stars"})
    assert result["fallback"] is False
    assert result["entries"] == [{"butler": "health", "prompt": "Log 80 kg", "segment": "80kg"}]


async def test_unparseable_classification_falls_back_with_original_text(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("switchboard", step("not json at all"))
    result = await butler_ecosystem.call("switchboard", "classify_message", {"text": "hmm"})
    assert result["fallback"] is True
    assert result["entries"] == [{"butler": "general", "prompt": "hmm", "segment": "hmm"}]
