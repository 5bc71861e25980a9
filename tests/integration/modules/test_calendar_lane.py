"""What the calendar shows beside the owner's events, and what it gives the briefing: a
butler's pending reminders in its lane (the calendar tools and the dashboard read the same
`butler_entries`), and today's events as the calendar section of the morning briefing."""

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from butlers.scheduling.butler_events import butler_entries
from tests.support.radicale import RadicaleServer, start_radicale

from .conftest import ButlerFactory, ModuleButler


@pytest.fixture(scope="module")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RadicaleServer]:
    with start_radicale(Path(tmp_path_factory.mktemp("radicale"))) as server:
        yield server


async def _butler(
    module_butler: ButlerFactory, radicale: RadicaleServer, user: str
) -> ModuleButler:
    await asyncio.to_thread(radicale.make_calendar, user, "home")
    return await module_butler(
        {
            "approvals": {},
            "reminders": {"timeZone": "Europe/Paris"},
            "calendar": {
                "url": radicale.principal_url(user),
                "usernameEnv": "CAL_USER",
                "timezone": "Europe/Paris",
                "syncIntervalSeconds": 0,
            },
        },
        environ={"CAL_USER": user},
    )


async def test_pending_reminders_are_in_the_butler_lane_and_cancelled_ones_are_not(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler = await _butler(module_butler, radicale, "lane-owner")
    now = datetime.now(UTC).replace(microsecond=0)
    once = await butler.call("remind", {"text": "call the bank", "after": "2h"})
    daily = await butler.call(
        "remind",
        {"text": "water the plants", "at": (now + timedelta(hours=3)).isoformat(),
         "rrule": "FREQ=DAILY"},
    )  # fmt: skip
    dropped = await butler.call("remind", {"text": "dropped", "after": "4h"})
    await butler.call("reminder_cancel", {"reminder_id": dropped["id"]})
    later = await butler.call("remind", {"text": "far away", "after": "10d"})

    window = (now.isoformat(), (now + timedelta(days=3)).isoformat())
    listed = await butler.call("calendar_list_events", {"start": window[0], "end": window[1]})
    reminders = [e for e in listed["butler_events"] if e["kind"] == "reminder"]
    by_ref: dict[str, list[Any]] = {}
    for entry in reminders:
        by_ref.setdefault(entry["ref"], []).append(datetime.fromisoformat(entry["starts_at"]))
    assert set(by_ref) == {once["id"], daily["id"]}  # not the cancelled one, not day 10
    assert later["id"] not in by_ref
    assert by_ref[once["id"]] == [datetime.fromisoformat(once["first_due_at"])]
    first = datetime.fromisoformat(daily["first_due_at"])
    assert by_ref[daily["id"]] == [first + timedelta(days=n) for n in range(3)]
    titles = {e["title"] for e in reminders}
    assert titles == {"call the bank", "water the plants"}

    # The dashboard's butler view reads the same entries from the butler's pool.
    pool = butler.context.pool
    entries = await butler_entries(pool, "probe", now, now + timedelta(days=3))
    assert [e.ref for e in entries if e.kind == "reminder"] == [r["ref"] for r in reminders]


async def test_a_butler_without_reminders_has_only_its_schedules(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"approvals": {}})
    now = datetime.now(UTC)
    entries = await butler_entries(butler.context.pool, "probe", now, now + timedelta(days=1))
    assert [e for e in entries if e.kind == "reminder"] == []


async def test_the_briefing_has_a_calendar_section_with_the_days_events(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler = await _butler(module_butler, radicale, "briefing-owner")
    for summary, start, end in (
        ("Dentist", "2026-06-10T10:00:00", "2026-06-10T11:00:00"),
        ("Lunch with Ana", "2026-06-10T12:30:00", "2026-06-10T13:30:00"),
        ("Next day", "2026-06-11T09:00:00", "2026-06-11T10:00:00"),
    ):
        await butler.call(
            "calendar_create_event",
            {"summary": summary, "start": start, "end": end, "location": "Paris"},
        )
    answer = await butler.call("briefing_sections", {"day": "2026-06-10"})
    assert "calendar" in answer["modules"]
    [section] = [s for s in answer["sections"] if s["module"] == "calendar"]
    assert section["skipped"] is None
    assert section["lines"] == [
        "10:00-11:00: Dentist (Paris)",
        "12:30-13:30: Lunch with Ana (Paris)",
    ]
    empty = await butler.call("briefing_sections", {"day": "2026-06-12"})
    [section] = [s for s in empty["sections"] if s["module"] == "calendar"]
    assert section["lines"] == []
