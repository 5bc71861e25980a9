"""What an operator reads off the dashboard about the butlers themselves: who asked for a
held call, held calls from the tool form, row counts, failed modules, restarts, and
sessions by kind."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2 as httpx

from butlers.testing.script_server import Script, step

from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions


def data(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


async def _contact(handle: EcosystemHandle, name: str) -> str:
    return str((await handle.call("relationship", "contact_add", {"name": name}))["id"])


async def _pending(dashboard: httpx.AsyncClient, contact_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        for action in data(await dashboard.get("/api/approvals/actions")):
            if action["tool_args"].get("contact_id") == contact_id:
                return dict(action)
        assert time.monotonic() < deadline, "the call was not held in 15 s"
        await asyncio.sleep(0.05)


async def _decide(dashboard: httpx.AsyncClient, action_id: str, decision: str) -> None:
    data(await dashboard.post(f"/api/approvals/actions/{action_id}/{decision}", json={}))


async def test_an_approval_says_who_asked_and_a_sessions_link_resolves(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    eco = butler_ecosystem
    # From a butler's LLM session: the session, whose page exists.
    in_session = await _contact(eco, "Asked By A Session")
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_delete", "arguments": {"contact_id": in_session}}]),
        step("Deleted."),
    )
    session = asyncio.create_task(eco.call("relationship", "trigger", {"prompt": "Delete it"}))
    action = await _pending(dashboard, in_session)
    assert (action["requested_by"], action["client_session"]) == ("session", None)
    detail = data(await dashboard.get(f"/api/butlers/relationship/sessions/{action['session_id']}"))
    assert (detail["id"], detail["status"]) == (action["session_id"], "running")
    await _decide(dashboard, action["id"], "approve")
    assert (await asyncio.wait_for(session, 15))["session_id"] == action["session_id"]

    # From another MCP client (this test's): no session to link, its MCP session named.
    direct = await _contact(eco, "Asked By A Client")
    call = asyncio.create_task(eco.call("relationship", "contact_delete", {"contact_id": direct}))
    action = await _pending(dashboard, direct)
    assert (action["requested_by"], action["session_id"]) == ("client", None)
    assert action["client_session"]
    await _decide(dashboard, action["id"], "reject")
    await asyncio.gather(call, return_exceptions=True)


async def test_a_tool_called_from_the_dashboard_is_held_then_answers_when_approved(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    contact_id = await _contact(butler_ecosystem, "Held From The Tool Form")
    body = {"tool_name": "contact_delete", "arguments": {"contact_id": contact_id}}
    call = asyncio.create_task(dashboard.post("/api/butlers/relationship/mcp/call", json=body))
    action = await _pending(dashboard, contact_id)
    assert (action["requested_by"], action["session_id"]) == ("dashboard", None)
    assert not call.done(), "the call waits for the decision"
    await _decide(dashboard, action["id"], "approve")
    result = data(await asyncio.wait_for(call, 15))
    assert result["is_error"] is False
    assert result["result"] == {"contact_id": contact_id, "deleted": True}


async def test_tables_show_their_real_row_counts(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    pool = await butler_ecosystem.pool("health")
    for value in (70.5, 71.0, 71.5):
        await butler_ecosystem.call(
            "health", "measurement_log", {"type": "weight", "value": value, "unit": "kg"}
        )
    tables = {t["name"]: t for t in data(await dashboard.get("/api/butlers/health/tables"))}
    for name in ("measurements", "sessions", "state"):
        exact = await pool.fetchval(f"SELECT count(*) FROM {name}")
        assert (tables[name]["row_count"], tables[name]["row_count_exact"]) == (exact, True), name
    assert tables["measurements"]["row_count"] >= 3
    assert all(t["row_count"] >= 0 for t in tables.values())


async def test_a_butler_with_a_failed_module_is_degraded_everywhere(
    dashboard: httpx.AsyncClient,
) -> None:
    # The messenger's e-mail module has no credentials in the test ecosystem.
    butler = data(await dashboard.get("/api/butlers/messenger"))
    assert butler["status"] == "degraded"
    assert "module email failed (credentials)" in butler["reason"]
    assert "EMAIL_USERNAME" in butler["reason"]
    overview = data(await dashboard.get("/api/overview"))
    [card] = [c for c in overview["butlers"] if c["name"] == "messenger"]
    assert (card["status"], card["reason"]) == ("degraded", butler["reason"])
    assert overview["totals"]["ok"] == sum(c["status"] == "ok" for c in overview["butlers"])
    assert overview["totals"]["ok"] < len(overview["butlers"])
    listed = {b["name"]: b["status"] for b in data(await dashboard.get("/api/butlers"))}
    assert listed["messenger"] == "degraded"
    issues = data(await dashboard.get("/api/issues"))
    kinds = {(i["kind"], i["severity"]) for i in issues if i["butler"] == "messenger"}
    assert {("butler_degraded", "warning"), ("module_failed", "warning")} <= kinds


async def _butler(dashboard: httpx.AsyncClient, name: str, until: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 45
    while True:
        response = await dashboard.get(f"/api/butlers/{name}")
        if response.status_code == 200 and until(response.json()["data"]):
            return dict(response.json()["data"])
        assert time.monotonic() < deadline, response.text
        await asyncio.sleep(0.2)


async def test_a_killed_and_restarted_butler_shows_its_restart_and_a_timeline_entry(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    before = await _butler(dashboard, "health", lambda b: b["restarts"] is not None)
    await butler_ecosystem.kill("health")
    try:
        await _butler(dashboard, "health", lambda b: b["status"] == "down")
    finally:
        await butler_ecosystem.restart("health")
    after = await _butler(
        dashboard,
        "health",
        lambda b: b["status"] == "ok" and b["restarts"] == before["restarts"] + 1,
    )
    assert after["last_restart_after_crash"] is True
    restarted_at = datetime.fromisoformat(after["last_restart_at"])
    assert abs(datetime.now(UTC) - restarted_at) < timedelta(minutes=2)
    timeline = data(
        await dashboard.get(
            "/api/timeline", params={"butler": "health", "kind": "butler_start", "limit": 5}
        )
    )
    newest = timeline[0]
    assert (newest["kind"], newest["status"]) == ("butler_start", "crashed")
    assert newest["summary"] == f"restart #{after['restarts']} after a crash"
    assert datetime.fromisoformat(newest["at"]) == restarted_at


async def test_sessions_are_filtered_and_counted_by_kind(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    # Years ago, on a day of its own: apart from every other test's sessions, and below
    # them in any newest-first list.
    at = datetime(2001, 1, 1, tzinfo=UTC) + timedelta(days=random.randrange(3000))
    request = uuid.uuid4()
    sources = {
        "classification": ("switchboard", f"classify:{request}"),
        "message": ("general", f"switchboard:{request}"),
        "scheduled": ("general", "schedule:daily-review"),
        "maintenance": ("general", "memory_consolidation"),
        "manual": ("general", "dashboard"),
    }
    ids = {}
    for offset, (kind, (butler, source)) in enumerate(sources.items()):
        [ids[kind]] = await seed_sessions(
            butler_ecosystem,
            butler,
            [{"created_at": at + timedelta(seconds=offset), "trigger_source": source}],
        )
    since = {"since": at.isoformat(), "until": (at + timedelta(minutes=1)).isoformat()}
    listed = data(await dashboard.get("/api/sessions", params=since))
    assert {s["id"]: s["kind"] for s in listed} == {i: k for k, i in ids.items()}
    for kind, session_id in ids.items():
        only = data(await dashboard.get("/api/sessions", params=since | {"kind": kind}))
        assert [s["id"] for s in only] == [session_id], kind
    both = data(
        await dashboard.get("/api/sessions", params=since | {"kind": ["message", "manual"]})
    )
    assert {s["id"] for s in both} == {ids["message"], ids["manual"]}
    counts = data(await dashboard.get("/api/sessions/kinds", params=since))
    assert {c["kind"]: c["count"] for c in counts} == dict.fromkeys(sources, 1)
    general = data(await dashboard.get("/api/sessions/kinds", params=since | {"butler": "general"}))
    assert {c["kind"]: c["count"] for c in general}["classification"] == 0
    refused = await dashboard.get("/api/sessions", params={"kind": "classifier"})
    assert refused.status_code == 400 and "kind" in refused.text
