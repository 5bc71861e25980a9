"""Observability end to end: one trace across butlers, tool spans, session rows, cost."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from typing import Any

import pytest

from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until
from tests.support.spans import read_spans

from .harness.ecosystem import EcosystemHandle
from .harness.env import scripted_cost
from .harness.runtime import E2E_API_KEY
from .test_approvals import _contact, _decide, _pending_row
from .test_switchboard_flow import classify_as, ingest


async def _spans(
    handle: EcosystemHandle, ready: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """Every span written so far, once `ready(spans)` holds (butlers write their span
    files from a background exporter, a moment after each call)."""
    span_dir = handle.span_dir
    if span_dir is None:
        pytest.skip(f"backend {handle.backend!r} collects no spans")

    def written() -> list[dict[str, Any]] | None:
        spans: list[dict[str, Any]] = []
        for path in sorted(span_dir.glob("*.jsonl")):
            spans += read_spans(path)
        return spans if ready(spans) else None

    found: list[dict[str, Any]] = await wait_until(
        written, timeout=10, message="the expected spans were never written"
    )
    return found


def _traced(name: str, message: dict[str, Any]) -> Callable[[list[dict[str, Any]]], bool]:
    """Spans hold the message's route span and a span `name` of the same trace."""

    def ready(spans: list[dict[str, Any]]) -> bool:
        [route_id] = [r["route_id"] for r in message["routes"]]
        routes = [s for s in spans if s["attributes"].get("route.id") == route_id]
        return bool(routes) and any(
            s["name"] == name and s["trace_id"] == routes[0]["trace_id"] for s in spans
        )

    return ready


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
    spans = await _spans(butler_ecosystem, _traced("tool trigger", weight_message))
    route = _route_span(spans, weight_message)
    assert route["service"] == "switchboard"
    target = [s for s in spans if s["service"] == "health" and s["trace_id"] == route["trace_id"]]
    assert target, "no health span carries the switchboard's trace id"
    roots = [s for s in target if s["parent_span_id"] not in {t["span_id"] for t in target}]
    assert [(r["name"], r["parent_span_id"]) for r in roots] == [("tool trigger", route["span_id"])]


async def test_tool_spans_carry_name_butler_module_args_status_and_duration(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    spans = await _spans(butler_ecosystem, _traced("tool measurement_log", weight_message))
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
    session = await health.fetchval(
        "SELECT trace_id FROM sessions WHERE session_id = $1::uuid", route["session_id"]
    )
    assert routed and session == routed


async def test_session_cost_is_its_tokens_times_the_configured_price(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    """The e2e ecosystem prices the scripted model (BUTLERS_PRICES); the row's cost is
    the tokens of both model calls (120+150 in, 30+10 out) at that price."""
    [route] = weight_message["routes"]
    health = await butler_ecosystem.pool("health")
    session = await health.fetchrow(
        "SELECT model, input_tokens, output_tokens, cost_usd FROM sessions "
        "WHERE session_id = $1::uuid",
        route["session_id"],
    )
    assert (session["model"], session["input_tokens"], session["output_tokens"]) == (
        "scripted",
        270,
        40,
    )
    assert float(session["cost_usd"]) == pytest.approx(scripted_cost(270, 40), abs=1e-9)
    assert session["cost_usd"] > 0
    listed = await butler_ecosystem.call(
        "health", "sessions_get", {"session_id": route["session_id"]}
    )
    assert listed["cost_usd"] == pytest.approx(scripted_cost(270, 40), abs=1e-9)


async def test_classification_session_is_logged_on_the_switchboard(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    pool = await butler_ecosystem.pool("switchboard")
    row = await pool.fetchrow(
        "SELECT status, prompt FROM sessions WHERE trigger_source = $1",
        f"classify:{weight_message['request_id']}",
    )
    assert row["status"] == "completed"
    assert "Log my weight: 82kg" in row["prompt"] and "\nhealth: " in row["prompt"]


async def test_sensitive_arguments_are_redacted_in_tool_spans(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """A declared sensitive argument (contact_update's email), a credential-named key
    (password) and a known secret value (the runtime key) never reach a span."""
    email = f"hidden-{secrets.token_hex(4)}@example.org"
    password = f"pw-{secrets.token_hex(6)}"
    contact_id = await _contact(butler_ecosystem, "Redacted Span")
    update = asyncio.create_task(
        butler_ecosystem.call_raw(
            "relationship", "contact_update", {"contact_id": contact_id, "email": email}
        )
    )
    row = await _pending_row(butler_ecosystem, contact_id)
    await _decide(butler_ecosystem, row["id"], "denied")
    assert (await asyncio.wait_for(update, 10)).is_error
    llm_script.route(
        "health",
        step(
            tool_calls=[
                call(
                    "state_set",
                    key="e2e-redacted-span",
                    value={"password": password, "note": f"key {E2E_API_KEY}"},
                )
            ]
        ),
        step("Stored."),
    )
    result = await butler_ecosystem.call("health", "trigger", {"prompt": "store my login"})
    assert result["success"] and not result["tool_calls"][0]["is_error"]

    def both(spans: list[dict[str, Any]]) -> bool:
        args = [(s["name"], s["attributes"].get("tool.args", "")) for s in spans]
        return any(n == "tool contact_update" and contact_id in a for n, a in args) and any(
            n == "tool state_set" and "e2e-redacted-span" in a for n, a in args
        )

    spans = await _spans(butler_ecosystem, both)
    [updated] = [
        s
        for s in spans
        if s["name"] == "tool contact_update" and contact_id in s["attributes"]["tool.args"]
    ]
    assert json.loads(updated["attributes"]["tool.args"]) == {
        "contact_id": contact_id,
        "email": "[REDACTED]",
    }
    [stored] = [
        s
        for s in spans
        if s["name"] == "tool state_set" and "e2e-redacted-span" in s["attributes"]["tool.args"]
    ]
    assert json.loads(stored["attributes"]["tool.args"]) == {
        "key": "e2e-redacted-span",
        "value": {"password": "[REDACTED]", "note": "key [REDACTED]"},
    }
    everything = json.dumps(spans)
    for secret in (email, password, E2E_API_KEY):
        assert secret not in everything


# One routed message, every span of its trace in the order each started, with its parent
# (as an index into this list): the switchboard's ingest, classification session and
# dispatch, then the target's trigger, session and tool call.
MESSAGE_SPANS = [
    ("switchboard", "tool ingest_v1", None),
    ("switchboard", "switchboard.ingest", 0),
    ("switchboard", "switchboard.classify", 1),
    ("switchboard", "butler.session", 2),
    ("switchboard", "switchboard.dispatch", 1),
    ("switchboard", "switchboard.route", 4),
    ("health", "tool trigger", 5),
    ("switchboard", "tool route_confirm", 6),  # the target confirms the route first
    ("health", "butler.session", 6),
    ("health", "tool measurement_log", 8),
]


async def test_one_message_spans_its_whole_ordered_tree(
    butler_ecosystem: EcosystemHandle, weight_message: dict[str, Any]
) -> None:
    """The whole sequence, not pairs: exactly these spans share the message's trace, they
    started in this order, each under the parent listed, after its parent started and
    before the ingest call (which waited for the dispatch) returned. (Classification
    outlives the ingest span, which ends once the message is accepted.)"""

    def whole(spans: list[dict[str, Any]]) -> bool:
        # Each process writes its spans as they end, from a background exporter.
        routes = [s for s in spans if s["attributes"].get("route.id") == route_id]
        return bool(routes) and len(
            [s for s in spans if s["trace_id"] == routes[0]["trace_id"]]
        ) >= len(MESSAGE_SPANS)

    [route_id] = [r["route_id"] for r in weight_message["routes"]]
    spans = await _spans(butler_ecosystem, whole)
    trace_id = _route_span(spans, weight_message)["trace_id"]
    trace = sorted((s for s in spans if s["trace_id"] == trace_id), key=lambda s: s["start_ns"])
    index = {s["span_id"]: i for i, s in enumerate(trace)}
    got = [(s["service"], s["name"], index.get(s["parent_span_id"])) for s in trace]
    assert got == MESSAGE_SPANS
    root = trace[0]
    assert root["parent_span_id"] is None
    for span in trace[1:]:
        parent = trace[index[span["parent_span_id"]]]
        assert parent["start_ns"] <= span["start_ns"] <= span["end_ns"] <= root["end_ns"], (
            span["name"],
            parent["name"],
        )
    [request_id, session_id] = (
        weight_message["request_id"],
        weight_message["routes"][0]["session_id"],
    )
    sessions = [s["attributes"] for s in trace if s["name"] == "butler.session"]
    assert [a["session.trigger_source"] for a in sessions] == [
        f"classify:{request_id}",
        f"switchboard:{request_id}",
    ]
    assert sessions[1]["session.id"] == session_id and sessions[1]["session.tool_calls"] == 1
    assert all(s["status"] in ("OK", "UNSET", "ok", None) for s in trace), [
        s["status"] for s in trace
    ]
