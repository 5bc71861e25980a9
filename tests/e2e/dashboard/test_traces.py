"""One message followed across butlers: the trace tree (golden) and its cost."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx2 as httpx

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, call, step

from ..harness.ecosystem import EcosystemHandle
from ..harness.golden import check_golden
from ..harness.normalize import Normalizer

TEXT = "Log my weight 81 kg and note that I must buy milk"
COSTS = {"switchboard": Decimal("0.0011"), "health": Decimal("0.0202"), "general": Decimal("0.3")}


def canonical(span: dict[str, Any]) -> dict[str, Any]:
    """Siblings that ran concurrently (two routes) in a stable order: by kind, butler, name."""
    children = sorted(
        (canonical(child) for child in span.get("children", [])),
        key=lambda s: (s["kind"], s["butler"] or "", s["name"], json.dumps(s["attributes"])),
    )
    return {**span, "children": children}


async def test_a_two_butler_message_is_one_trace_with_its_summed_cost(
    butler_ecosystem: EcosystemHandle,
    dashboard: httpx.AsyncClient,
    llm_script: Script,
    update_golden: bool,
) -> None:
    llm_script.route(
        "switchboard",
        step(
            json.dumps(
                [
                    {"butler": "health", "prompt": "Log weight 81 kg", "segment": "weight 81 kg"},
                    {"butler": "general", "prompt": "Note: buy milk", "segment": "buy milk"},
                ]
            ),
            usage=(300, 40),
        ),
    )
    llm_script.route(
        "health",
        step(
            tool_calls=[call("measurement_log", type="weight", value=81, unit="kg")],
            usage=(100, 20),
        ),
        step("Logged 81 kg.", usage=(50, 5)),
    )
    llm_script.route(
        "general",
        step(
            tool_calls=[call("note_add", title="Milk", body="buy milk", collection="errands")],
            usage=(80, 10),
        ),
        step("Noted.", usage=(40, 4)),
    )
    envelope = build_envelope(TEXT, channel="telegram", provider="telegram", sender="e2e-user")
    result = await butler_ecosystem.call(
        "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": True}
    )
    request_id = result["request_id"]
    assert result["fanout_status"] == "completed"
    # Prices the scripted model does not have, set on the real rows (as each butler).
    trace_id = None
    for butler, cost in COSTS.items():
        pool = await butler_ecosystem.pool(butler)
        if trace_id is None:
            trace_id = await pool.fetchval(
                "SELECT trace_id FROM sessions WHERE trigger_source = $1", f"classify:{request_id}"
            )
        await pool.execute("UPDATE sessions SET cost_usd = $1 WHERE trace_id = $2", cost, trace_id)

    by_request = (await dashboard.get(f"/api/traces/{request_id}")).json()
    by_trace = (await dashboard.get(f"/api/traces/{trace_id}")).json()
    assert by_request == by_trace
    trace = by_request["data"]
    assert trace["cost_usd"] == float(sum(COSTS.values())) == 0.3213
    assert (trace["session_count"], trace["tool_call_count"], trace["unpriced_sessions"]) == (
        3,
        2,
        0,
    )
    assert trace["butlers"] == ["general", "health", "switchboard"]
    assert trace["status"] == "ok" and trace["request_id"] == request_id
    [message] = trace["spans"]
    assert [c["kind"] for c in message["children"]].count("route") == 2

    normalizer = Normalizer()
    normalizer.register(request_id, "REQUEST_ID")
    tree = {**trace, "spans": [canonical(s) for s in trace["spans"]]}
    problems = check_golden(
        "dashboard-trace", {"trace.json": normalizer.dumps(tree)}, update=update_golden
    )
    assert not problems, "\n".join(problems)

    listed = (await dashboard.get("/api/traces", params={"limit": 200})).json()
    [summary] = [t for t in listed["data"] if t["trace_id"] == trace_id]
    assert summary["request_id"] == request_id and summary["message_preview"] == TEXT
    assert (summary["session_count"], summary["cost_usd"]) == (3, 0.3213)


async def test_an_unknown_trace_is_not_found(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get("/api/traces/" + "f" * 32)
    assert (response.status_code, response.json()["error"]["code"]) == (404, "NOT_FOUND")
