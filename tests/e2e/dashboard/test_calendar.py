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
from ..harness.env import CALDAV_CALENDAR, CALDAV_SERVER, CALDAV_USER

WEEK = {"start": "2026-12-07T00:00:00Z", "end": "2026-12-14T00:00:00Z"}


@pytest.fixture
def caldav_url(request: pytest.FixtureRequest, butler_ecosystem: EcosystemHandle) -> str:
    url = request.config.stash.get(CALDAV_SERVER, None)
    if url is None:
        pytest.skip(f"no CalDAV server reachable from the {butler_ecosystem.backend} backend")
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
