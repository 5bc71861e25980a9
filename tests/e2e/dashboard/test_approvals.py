"""A held call is listed and evented within a second; approving it from the dashboard
resumes it; rejecting it fails it with the reason."""

from __future__ import annotations

import asyncio
import time

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle
from .conftest import sse


async def _contact(handle: EcosystemHandle, name: str) -> str:
    return str((await handle.call("relationship", "contact_add", {"name": name}))["id"])


async def _pending(dashboard: httpx.AsyncClient, contact_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 10
    while True:
        queue = (await dashboard.get("/api/approvals/actions")).json()
        for action in queue["data"]:
            if action["tool_args"].get("contact_id") == contact_id:
                return dict(action)
        assert time.monotonic() < deadline, queue
        await asyncio.sleep(0.05)


async def test_held_call_is_listed_evented_and_resumed_by_approval(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    contact_id = await _contact(butler_ecosystem, "Held By The Dashboard")
    async with sse(dashboard) as events:
        mark = len(events.events)
        call = asyncio.create_task(
            butler_ecosystem.call("relationship", "contact_delete", {"contact_id": contact_id})
        )
        action = await _pending(dashboard, contact_id)
        listed = time.time()
        assert (action["butler"], action["tool_name"], action["status"]) == (
            "relationship",
            "contact_delete",
            "pending",
        )
        pool = await butler_ecosystem.pool("relationship")
        committed = await pool.fetchval(
            "SELECT requested_at FROM approvals WHERE id = $1::uuid", action["id"]
        )
        event = await events.wait_for(
            lambda e: e.type == "approval_requested" and e.data["id"] == action["id"],
            after=mark,
        )
        assert (
            event.data["butler"] == "relationship" and event.data["tool_name"] == "contact_delete"
        )
        # Listed and evented within a second of the row's insert (same machine clock).
        assert listed - committed.timestamp() < 1.0
        assert event.wall - committed.timestamp() < 1.0
        assert float(action["seconds_left"]) > 0
        assert not call.done()
        approved = await dashboard.post(
            f"/api/approvals/actions/{action['id']}/approve", json={"reason": "cleanup"}
        )
        assert approved.status_code == 200, approved.text
        decided = approved.json()["data"]
        assert (decided["status"], decided["reason"]) == ("approved", "cleanup")
        assert str(decided["decided_by"]).startswith("user:dashboard:")  # identity, then who
        assert await asyncio.wait_for(call, 10) == {"contact_id": contact_id, "deleted": True}
        await events.wait_for(
            lambda e: e.type == "approval_decided" and e.data["id"] == action["id"], after=mark
        )
    again = await dashboard.post(f"/api/approvals/actions/{action['id']}/approve")
    assert again.json()["error"]["code"] == "TOOL_ERROR"
    history = (await dashboard.get("/api/approvals/actions/executed?status=approved")).json()
    assert action["id"] in {a["id"] for a in history["data"]}


async def test_rejection_fails_the_held_call_with_the_reason(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    contact_id = await _contact(butler_ecosystem, "Kept By The Dashboard")
    call = asyncio.create_task(
        butler_ecosystem.call_raw("relationship", "contact_delete", {"contact_id": contact_id})
    )
    action = await _pending(dashboard, contact_id)
    rejected = await dashboard.post(
        f"/api/approvals/actions/{action['id']}/reject", json={"reason": "keep her"}
    )
    assert rejected.json()["data"]["status"] == "denied"
    result = await asyncio.wait_for(call, 10)
    assert result.is_error and "keep her" in result.content[0].text
    detail = (await dashboard.get(f"/api/approvals/actions/{action['id']}")).json()["data"]
    assert (detail["status"], detail["reason"], detail["seconds_left"]) == (
        "denied",
        "keep her",
        None,
    )
    metrics = (await dashboard.get("/api/approvals/metrics")).json()["data"]
    assert metrics["denied"] >= 1 and metrics["by_tool"]["contact_delete"]["denied"] >= 1


async def test_rules_are_read_from_specs_and_tools_and_cannot_be_written(
    dashboard: httpx.AsyncClient,
) -> None:
    rules = {r["id"]: r for r in (await dashboard.get("/api/approvals/rules")).json()["data"]}
    delete = rules["relationship:contact_delete"]
    assert (delete["mode"], delete["source"], delete["active"]) == ("always", "tool", True)
    assert rules["relationship:contact_update"]["mode"] == "conditional"
    refused = await dashboard.post("/api/approvals/rules", json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (501, "NOT_SUPPORTED")
