"""The calendar workspace over a running ecosystem: the general butler's calendar on the
session's CalDAV server (Radicale), written through its tools, read from its local copy."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx2 as httpx
import pytest
from icalendar import Calendar

from ..harness.ecosystem import EcosystemHandle
from ..harness.env import CALDAV_CALENDAR, CALDAV_SERVER, CALDAV_UNREACHABLE, CALDAV_USER

WEEK = {"start": "2026-12-07T00:00:00Z", "end": "2026-12-14T00:00:00Z"}


@pytest.fixture
def caldav_url(request: pytest.FixtureRequest, butler_ecosystem: EcosystemHandle) -> str:
    url = request.config.stash.get(CALDAV_SERVER, None)
    if url is None:
        pytest.skip(CALDAV_UNREACHABLE)
    return url


def _server_summaries(url: str) -> set[str]:
    import caldav

    client = caldav.DAVClient(url=url, username=CALDAV_USER, password="e2e")
    [calendar] = [c for c in client.principal().calendars() if c.name == CALDAV_CALENDAR]
    return {
        str(event["SUMMARY"])
        for obj in calendar.events()
        for event in Calendar.from_ical(obj.data).walk("VEVENT")
    }


async def test_an_event_made_in_the_workspace_is_on_the_server_and_in_the_week(
    dashboard: httpx.AsyncClient, caldav_url: str
) -> None:
    title = f"Planning {uuid.uuid4().hex[:6]}"
    made = await dashboard.post(
        "/api/calendar/workspace/user-events",
        json={
            "action": "create",
            "butler": "general",
            "event": {
                "summary": title,
                "start": "2026-12-08T10:00:00Z",
                "end": "2026-12-08T11:00:00Z",
            },
        },
    )
    assert made.status_code == 200, made.text
    outcome = made.json()["data"]
    assert outcome["status"] == "done" and outcome["result"]["summary"] == title
    assert title in await asyncio.to_thread(_server_summaries, caldav_url)

    week = (await dashboard.get("/api/calendar/workspace", params={**WEEK, "view": "user"})).json()
    [entry] = [e for e in week["data"] if e["title"] == title]
    assert entry["butler"] == "general" and entry["source_type"] == "caldav"
    assert entry["start"].startswith("2026-12-08T10:00:00") and entry["editable"]

    moved = await dashboard.post(
        "/api/calendar/workspace/user-events",
        json={
            "action": "update",
            "butler": "general",
            "event_id": entry["event_id"],
            "event": {"summary": title + " (moved)"},
        },
    )
    assert moved.status_code == 200, moved.text
    assert title + " (moved)" in await asyncio.to_thread(_server_summaries, caldav_url)


async def test_the_butler_lane_shows_schedules_and_meta_shows_sync_state(
    dashboard: httpx.AsyncClient, caldav_url: str
) -> None:
    butlers = (
        await dashboard.get("/api/calendar/workspace", params={**WEEK, "view": "butler"})
    ).json()["data"]
    runs = [e for e in butlers if e["butler"] == "general" and e["title"] == "prune-sessions"]
    assert len(runs) == 7, "the nightly schedule, once a day"
    assert all(e["source_type"] == "schedule" for e in runs)

    synced = await dashboard.post("/api/calendar/workspace/sync", json={"butler": "general"})
    assert synced.status_code == 200, synced.text
    meta: dict[str, Any] = (await dashboard.get("/api/calendar/workspace/meta")).json()["data"]
    [source] = [s for s in meta["sources"] if s["butler"] == "general"]
    assert (source["calendar"], source["sync_state"]) == (CALDAV_CALENDAR, "fresh")
    assert "general" in meta["writable"]

    bad = await dashboard.get(
        "/api/calendar/workspace", params={"start": WEEK["end"], "end": WEEK["start"]}
    )
    assert bad.status_code == 400 and "after" in bad.json()["error"]["message"]


async def _week_entries(dashboard: httpx.AsyncClient, title: str) -> list[dict[str, Any]]:
    week = (await dashboard.get("/api/calendar/workspace", params={**WEEK, "view": "user"})).json()
    return sorted(
        (e for e in week["data"] if e["title"].startswith(title)), key=lambda e: e["start"]
    )


async def test_one_occurrence_is_moved_and_one_cancelled_from_the_workspace(
    dashboard: httpx.AsyncClient, caldav_url: str
) -> None:
    title = f"Daily {uuid.uuid4().hex[:6]}"
    made = await dashboard.post(
        "/api/calendar/workspace/user-events",
        json={
            "action": "create",
            "butler": "general",
            "event": {
                "summary": title,
                "start": "2026-12-08T07:00:00Z",
                "end": "2026-12-08T07:30:00Z",
                "rrule": "FREQ=DAILY;COUNT=3",
            },
        },
    )
    assert made.status_code == 200, made.text
    first, second, third = await _week_entries(dashboard, title)
    assert first["recurrence_id"] and first["recurring"]

    moved = await dashboard.post(
        "/api/calendar/workspace/user-events",
        json={
            "action": "update",
            "butler": "general",
            "event_id": second["event_id"],
            "recurrence_id": second["recurrence_id"],
            "event": {"start": "2026-12-09T16:00:00Z", "summary": title + " (late)"},
        },
    )
    assert moved.status_code == 200, moved.text
    refused = await dashboard.post(
        "/api/calendar/workspace/user-events",
        json={
            "action": "update",
            "butler": "general",
            "event_id": second["event_id"],
            "recurrence_id": second["recurrence_id"],
            "event": {"rrule": "FREQ=WEEKLY"},
        },
    )
    assert refused.status_code == 400 and "whole series" in refused.json()["error"]["message"]

    cancel = await dashboard.post(
        "/api/calendar/workspace/user-events",
        json={
            "action": "delete",
            "butler": "general",
            "event_id": third["event_id"],
            "recurrence_id": third["recurrence_id"],
        },
    )
    assert cancel.status_code == 200, cancel.text
    outcome = cancel.json()["data"]
    assert outcome["status"] == "pending_approval" and outcome["approval_id"]
    approved = await dashboard.post(f"/api/approvals/actions/{outcome['approval_id']}/approve")
    assert approved.status_code == 200, approved.text

    async def settled() -> list[tuple[str, str]]:
        for _ in range(100):
            found = [(e["start"][:19], e["title"]) for e in await _week_entries(dashboard, title)]
            if len(found) == 2:
                return found
            await asyncio.sleep(0.1)
        return found

    assert await settled() == [
        ("2026-12-08T07:00:00", title),
        ("2026-12-09T16:00:00", title + " (late)"),
    ]
    assert {title, title + " (late)"} <= await asyncio.to_thread(_server_summaries, caldav_url)
