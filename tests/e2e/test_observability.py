"""Observability end to end: one trace across butlers, tool spans, session rows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from butlers.testing.script_server import Script, call, step
from tests.support.spans import read_spans

from .harness.ecosystem import EcosystemHandle
from .test_switchboard_flow import classify_as, ingest


def _spans(handle: EcosystemHandle) -> list[dict[str, Any]]:
    if handle.span_dir is None:
        pytest.skip(f"backend {handle.backend!r} collects no spans")
    spans: list[dict[str, Any]] = []
    for path in sorted(handle.span_dir.glob("*.jsonl")):
        spans += read_spans(path)
    return spans


@pytest.fixture
async def weight_message(butler_ecosystem: EcosystemHandle, llm_script: Script) -> dict[str, Any]:
    llm_script.route("switchboard", classify_as(("health", "Log weight 82 kg", "82kg")))
    llm_script.route(
        "health",
        step(
            tool_calls=[call("measurement_log", type="weight", value=82, unit="kg")],
            usage=(120, 30),
        ),
        step("Logged 82 kg.", usage=(150, 10)),
    )
    return await ingest(butler_ecosystem, "Log my weight: 82kg")


def _route_span(spans: list[dict[str, Any]], message: dict[str, Any]) -> dict[str, Any]:
    [route_id] = [r["route_id"] for r in message["routes"]]
    [span] = [s for s in spans if s["attributes"].get("route.id") == route_id]
    return span


async def test_trace_context_crosses_from_switchboard_into_the_target(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    spans = _spans(butler_ecosystem)
    route = _route_span(spans, weight_message)
    assert route["service"] == "switchboard"
    target = [s for s in spans if s["service"] == "health" and s["trace_id"] == route["trace_id"]]
    assert target, "no health span carries the switchboard's trace id"
    roots = [s for s in target if s["parent_span_id"] not in {t["span_id"] for t in target}]
    assert [(r["name"], r["parent_span_id"]) for r in roots] == [("tool trigger", route["span_id"])]


async def test_tool_spans_carry_name_butler_module_args_status_and_duration(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    spans = _spans(butler_ecosystem)
    route = _route_span(spans, weight_message)
    [span] = [
        s
        for s in spans
        if s["name"] == "tool measurement_log" and s["trace_id"] == route["trace_id"]
    ]
    attrs = span["attributes"]
    assert attrs["tool.name"] == "measurement_log"
    assert attrs["tool.butler"] == "health"
    assert attrs["tool.module"] == "health"
    assert attrs["tool.result.status"] == "ok"
    assert attrs["tool.duration_ms"] >= 0
    assert json.loads(attrs["tool.args"]) == {"type": "weight", "value": 82, "unit": "kg"}


async def test_session_and_routing_rows_share_the_trace_id(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    [route] = weight_message["routes"]
    switchboard = await butler_ecosystem.pool("switchboard")
    routed = await switchboard.fetchval(
        "SELECT trace_id FROM routing_log WHERE route_id = $1::uuid", route["route_id"]
    )
    health = await butler_ecosystem.pool("health")
    session = await health.fetchrow(
        "SELECT trace_id, input_tokens, output_tokens, cost_usd FROM sessions "
        "WHERE session_id = $1::uuid",
        route["session_id"],
    )
    assert routed and session["trace_id"] == routed
    assert (session["input_tokens"], session["output_tokens"]) == (270, 40)
    assert session["cost_usd"] is not None


async def test_classification_session_is_logged_on_the_switchboard(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    pool = await butler_ecosystem.pool("switchboard")
    row = await pool.fetchrow(
        "SELECT status, prompt FROM sessions WHERE trigger_source = $1",
        f"classify:{weight_message['request_id']}",
    )
    assert row["status"] == "completed"
    assert "Log my weight: 82kg" in row["prompt"] and "- health:" in row["prompt"]
