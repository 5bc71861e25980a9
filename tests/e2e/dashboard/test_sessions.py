"""Sessions across butlers: exact slices and totals, keyset cursors, partial failure."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx

from butlers.stores.sessions import SESSION_STATUSES
from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions

BUTLERS = ("general", "health", "messenger")


async def seed_interleaved(handle: EcosystemHandle) -> tuple[str, list[tuple[Any, ...]]]:
    """25 sessions on each of three butlers, interleaved in time, with ties across
    butlers (each round shares one timestamp) and within one (health's first two)."""
    tag = f"seed:{uuid.uuid4().hex[:12]}"
    base = datetime(2021, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
    expected = []
    for butler in BUTLERS:
        rounds = [0, *range(24)] if butler == "health" else list(range(25))
        rows = [
            {
                "session_id": uuid.uuid4(),
                "trigger_source": tag,
                "created_at": base + timedelta(seconds=r),
                "status": "error" if r % 10 == 3 else "completed",
            }
            for r in rounds
        ]
        await seed_sessions(handle, butler, rows)
        expected += [
            (row["created_at"], butler, str(row["session_id"]), row["status"]) for row in rows
        ]
    expected.sort(reverse=True)  # newest first; ties by butler, then id, descending
    return tag, expected


async def get_page(dashboard: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    response = await dashboard.get(url, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_offset_pages_are_exact_slices_of_the_merged_order(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    tag, expected = await seed_interleaved(butler_ecosystem)
    ids = [e[2] for e in expected]
    for offset, limit in ((0, 10), (10, 10), (33, 7), (70, 10), (75, 5)):
        page = await get_page(
            dashboard, "/api/sessions", trigger_source=tag, offset=offset, limit=limit
        )
        assert [s["id"] for s in page["data"]] == ids[offset : offset + limit]
        meta = page["meta"]
        assert (meta["total"], meta["offset"], meta["limit"]) == (75, offset, limit)
        assert meta["has_more"] is (offset + limit < 75) and meta["failed_butlers"] == []
    started = [datetime.fromisoformat(s["started_at"]) for s in page["data"]]
    assert started == sorted(started, reverse=True)


async def test_filters_narrow_the_total(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    tag, expected = await seed_interleaved(butler_ecosystem)
    two = await get_page(
        dashboard, "/api/sessions", trigger_source=tag, butler=["health", "general"], limit=50
    )
    assert two["meta"]["total"] == 50
    assert [s["id"] for s in two["data"]] == [e[2] for e in expected if e[1] != "messenger"]
    errors = await get_page(dashboard, "/api/sessions", trigger_source=tag, status="error")
    assert errors["meta"]["total"] == sum(e[3] == "error" for e in expected) == 9
    assert [s["id"] for s in errors["data"]] == [e[2] for e in expected if e[3] == "error"]
    one = await get_page(dashboard, "/api/butlers/health/sessions", trigger_source=tag, limit=3)
    assert one["meta"]["total"] == 25
    assert [s["id"] for s in one["data"]] == [e[2] for e in expected if e[1] == "health"][:3]


async def test_a_cursor_walk_visits_every_session_once_in_order(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    tag, expected = await seed_interleaved(butler_ecosystem)
    seen: list[str] = []
    page = await get_page(dashboard, "/api/sessions", trigger_source=tag, limit=7)
    while True:
        assert page["meta"]["offset"] == len(seen) and page["meta"]["total"] == 75
        seen += [s["id"] for s in page["data"]]
        cursor = page["meta"]["next_cursor"]
        if cursor is None:
            break
        page = await get_page(
            dashboard, "/api/sessions", trigger_source=tag, limit=7, cursor=cursor
        )
    assert seen == [e[2] for e in expected]
    assert page["meta"]["has_more"] is False


async def test_an_unreadable_schema_leaves_the_others_listed_and_is_named(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    tag, expected = await seed_interleaved(butler_ecosystem)
    reader = urlsplit(butler_ecosystem.dashboard_dsn or "").username
    messenger = await butler_ecosystem.pool("messenger")
    await messenger.execute(f'REVOKE SELECT ON sessions FROM "{reader}"')
    try:
        page = await get_page(dashboard, "/api/sessions", trigger_source=tag, limit=100)
    finally:
        await messenger.execute(f'GRANT SELECT ON sessions TO "{reader}"')
    assert page["meta"]["failed_butlers"] == ["messenger"]
    assert page["meta"]["total"] == 50
    assert [s["id"] for s in page["data"]] == [e[2] for e in expected if e[1] != "messenger"]
    healed = await get_page(dashboard, "/api/sessions", trigger_source=tag, limit=1)
    assert healed["meta"]["total"] == 75 and healed["meta"]["failed_butlers"] == []


async def test_session_detail_has_tool_calls_with_timing_and_cost(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    calls = [
        {
            "name": "state_get",
            "arguments": {"key": "a"},
            "result": None,
            "is_error": False,
            "started_at": "2021-03-04T05:06:07.500000+00:00",
            "duration_ms": 1.25,
        },
    ]
    [session_id] = await seed_sessions(
        butler_ecosystem,
        "general",
        [
            {
                "created_at": datetime(2021, 3, 4, tzinfo=UTC),
                "tool_calls": calls,
                "model": "gpt-4o",
                "input_tokens": 1000,
                "output_tokens": 100,
                "cost_usd": 0.0035,
            }
        ],
    )
    detail = (await dashboard.get(f"/api/butlers/general/sessions/{session_id}")).json()["data"]
    assert detail["tool_calls"][0]["duration_ms"] == 1.25
    assert detail["tool_calls"][0]["started_at"].startswith("2021-03-04T05:06:07.5")
    assert (detail["cost_usd"], detail["priced"], detail["tool_call_count"]) == (0.0035, True, 1)


async def test_every_session_status_is_a_filter_the_api_accepts(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    """One vocabulary: each status a row can have filters the list (none is a 4xx)."""
    tag = f"seed:{uuid.uuid4().hex[:12]}"
    at = datetime(2021, 5, 6, 7, 8, 9, tzinfo=UTC)
    rows = [
        {"trigger_source": tag, "created_at": at + timedelta(seconds=i), "status": status}
        for i, status in enumerate(SESSION_STATUSES)
    ]
    ids = dict(
        zip(SESSION_STATUSES, await seed_sessions(butler_ecosystem, "general", rows), strict=True)
    )
    for status, session_id in ids.items():
        for url in ("/api/sessions", "/api/butlers/general/sessions"):
            page = await get_page(dashboard, url, trigger_source=tag, status=status)
            assert [(s["id"], s["status"]) for s in page["data"]] == [(session_id, status)]
    refused = await dashboard.get("/api/sessions", params={"status": "finished"})
    assert refused.status_code in (400, 422) and "status" in refused.text


async def test_a_running_session_is_cancelled_through_the_dashboard(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    # The model answers after a minute and would then store something: the cancel
    # stops it first, so neither happens.
    probe = f"cancel-probe-{uuid.uuid4().hex[:6]}"
    llm_script.route("general", step(tool_calls=[call("state_set", key=probe, value=1)], delay=60))
    started = time.monotonic()
    trigger = asyncio.create_task(
        butler_ecosystem.call("general", "trigger", {"prompt": f"slow work {probe}"})
    )
    try:

        async def running() -> str | None:
            # Cancel while the model "thinks" (its answer is in, the delay runs), so
            # what is cut short is the model call, not the test's connection to it.
            asked = any(probe in str(r.get("messages")) for r in llm_script.requests_for("general"))
            page = await get_page(dashboard, "/api/butlers/general/sessions", status="running")
            found = next((s["id"] for s in page["data"] if probe in s["prompt_preview"]), None)
            return found if asked else None

        session_id = await wait_until(running, timeout=30, interval=0.1)
        answer = await dashboard.post(f"/api/butlers/general/sessions/{session_id}/cancel")
        assert answer.status_code == 200, answer.text
        detail = answer.json()["data"]
        assert detail["status"] == "cancelled" and detail["error"].startswith("cancelled by ")
        assert detail["completed_at"] is not None
        result = await asyncio.wait_for(trigger, 15)
    finally:
        if not trigger.done():
            trigger.cancel()
    assert result["success"] is False and result["error"] == detail["error"]
    assert time.monotonic() - started < 45, "the session's runtime ran on after the cancel"
    assert await butler_ecosystem.call("general", "state_get", {"key": probe}) is None
    # The one model call it made is on record, cut short.
    assert [c["error"] for c in detail["llm_calls"]] == ["cancelled"]
    again = await dashboard.post(f"/api/butlers/general/sessions/{session_id}/cancel")
    assert again.status_code >= 400 and "is not running" in again.text
    # The butler takes its next session at once.
    llm_script.route("general", step("next"))
    try:
        nxt = await asyncio.wait_for(
            butler_ecosystem.call("general", "trigger", {"prompt": "next"}), 30
        )
    except TimeoutError:
        page = await get_page(dashboard, "/api/butlers/general/sessions", status="running")
        raise AssertionError(
            f"the next session did not end within 30 s; running: {page['data']}"
        ) from None
    assert nxt["success"], nxt
    audit = await dashboard.get("/api/audit-log", params={"operation": "session.cancel"})
    assert session_id in audit.text
