"""The calendar module against a real CalDAV server (Radicale), checked with an independent
client (the `caldav` library)."""

import asyncio
import itertools
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx2 as httpx
import pytest
from icalendar import Calendar
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from butlers.jsonutil import to_json
from butlers.modules.calendar.store import list_instances
from tests.support.radicale import RadicaleServer, start_radicale
from tests.support.serving import served_asgi

from .conftest import ButlerFactory, ModuleButler

PARIS = ZoneInfo("Europe/Paris")
_users = itertools.count()


@pytest.fixture(scope="module")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RadicaleServer]:
    with start_radicale(Path(tmp_path_factory.mktemp("radicale"))) as server:
        yield server


async def _butler(
    module_butler: ButlerFactory, radicale: RadicaleServer, **config: Any
) -> tuple[ModuleButler, Any]:
    """A butler whose calendar module logs in as a fresh user with one calendar "home"."""
    user = f"owner{next(_users)}"
    calendar = await asyncio.to_thread(radicale.make_calendar, user, "home")
    butler = await module_butler(
        {
            "approvals": {},
            "calendar": {
                "url": radicale.principal_url(user),
                "usernameEnv": "CAL_USER",
                "passwordEnv": "CAL_PASSWORD",
                "timezone": "Europe/Paris",
                "syncIntervalSeconds": 0,
                **config,
            },
        },
        environ={"CAL_USER": user, "CAL_PASSWORD": "secret"},
        approval_timeout=10,
    )
    return butler, calendar


def _events_on_server(calendar: Any) -> list[Any]:
    """The VEVENTs the server holds, read with the caldav library."""
    found = []
    for obj in calendar.events():
        found.extend(Calendar.from_ical(obj.data).walk("VEVENT"))
    return found


async def _list(butler: ModuleButler, start: str, end: str) -> list[dict[str, Any]]:
    result = await butler.call("calendar_list_events", {"start": start, "end": end})
    return list(result["events"])


async def test_event_created_by_the_tool_is_on_the_server(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    created = await butler.call(
        "calendar_create_event",
        {
            "summary": "Dentist",
            "start": "2026-06-10T10:00:00",
            "end": "2026-06-10T11:00:00",
            "location": "Rue de Rivoli",
            "alarms_minutes_before": [30],
        },
    )
    assert created["summary"] == "Dentist" and created["calendar"] == "home"
    [event] = await asyncio.to_thread(_events_on_server, calendar)
    assert str(event["SUMMARY"]) == "Dentist"
    assert event["DTSTART"].dt == datetime(2026, 6, 10, 10, tzinfo=PARIS)
    assert str(event["LOCATION"]) == "Rue de Rivoli"
    [alarm] = event.walk("VALARM")
    assert alarm["TRIGGER"].dt.total_seconds() == -30 * 60
    [listed] = await _list(butler, "2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z")
    assert listed["starts_at"].startswith("2026-06-10T08:00:00")  # 10:00 in Paris, summer


SERVER_EVENT = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:{uid}
DTSTAMP:20260101T000000Z
DTSTART:20260701T120000Z
DTEND:20260701T130000Z
SUMMARY:{summary}
ATTENDEE;CN=Bob;PARTSTAT=ACCEPTED:mailto:bob@example.org
END:VEVENT
END:VCALENDAR
"""


async def test_events_made_on_the_server_appear_after_a_sync(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    window = ("2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z")
    first = await butler.call("calendar_sync")
    assert await _list(butler, *window) == []
    server_event = await asyncio.to_thread(
        calendar.save_event, SERVER_EVENT.format(uid="lunch-1", summary="Lunch")
    )
    assert await _list(butler, *window) == [], "the tool reads the local copy"
    [report] = await butler.call("calendar_sync")
    assert first[0]["mode"] == "etag", "the first sync compares ETags"
    assert (report["mode"], report["changed"]) == ("token", 1), "later ones use the token"
    [listed] = await _list(butler, *window)
    assert listed["summary"] == "Lunch"
    assert listed["attendees"] == [
        {"email": "bob@example.org", "name": "Bob", "role": None, "status": "ACCEPTED"}
    ]
    # An edit and a deletion on the server arrive incrementally (by sync token).
    server_event.data = SERVER_EVENT.format(uid="lunch-1", summary="Long lunch")
    await asyncio.to_thread(server_event.save)
    [report] = await butler.call("calendar_sync")
    assert (report["mode"], report["changed"]) == ("token", 1)
    assert [e["summary"] for e in await _list(butler, *window)] == ["Long lunch"]
    await asyncio.to_thread(server_event.delete)
    [report] = await butler.call("calendar_sync")
    assert report["removed"] == 1
    assert await _list(butler, *window) == []


async def test_a_listing_holds_what_the_rows_hold_and_follows_a_renamed_calendar(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    window = ("2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z")
    await asyncio.to_thread(
        calendar.save_event, SERVER_EVENT.format(uid="lunch-2", summary='Lunch "chez" Léa')
    )
    await butler.call("calendar_sync")
    [listed] = await _list(butler, *window)
    # The tool's entries (stored JSON text) hold what the dashboard's row read gives.
    pool = butler.context.pool
    [row] = await list_instances(pool, *(datetime.fromisoformat(t) for t in window))
    expected = to_json(row)
    assert isinstance(expected, dict)
    # (times to the second, as the tool has always given them)
    assert listed["updated_at"][:19] == expected.pop("updated_at")[:19]
    assert {k: v for k, v in listed.items() if k != "updated_at"} == expected
    assert listed["summary"] == 'Lunch "chez" Léa' and listed["calendar"] == "home"
    # Another process renames the calendar: the next listing says so.
    await pool.execute("UPDATE calendar_sources SET name = 'Family \\ friends'")
    [renamed] = await _list(butler, *window)
    assert renamed["calendar"] == "Family \\ friends"
    assert renamed == listed | {"calendar": "Family \\ friends"}


WEEKLY = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VTIMEZONE
TZID:Europe/Paris
BEGIN:STANDARD
DTSTART:19701025T030000
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:19700329T020000
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
END:DAYLIGHT
END:VTIMEZONE
BEGIN:VEVENT
UID:standup
DTSTAMP:20260101T000000Z
DTSTART;TZID=Europe/Paris:20260316T090000
DTEND;TZID=Europe/Paris:20260316T093000
RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=5
EXDATE;TZID=Europe/Paris:20260406T090000
SUMMARY:Standup
END:VEVENT
END:VCALENDAR
"""


async def test_a_weekly_event_keeps_its_local_time_across_the_dst_change(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    await asyncio.to_thread(calendar.save_event, WEEKLY)
    await butler.call("calendar_sync")
    listed = await _list(butler, "2026-03-01T00:00:00Z", "2026-05-01T00:00:00Z")
    starts = [e["starts_at"] for e in listed]
    # Paris moves from UTC+1 to UTC+2 on 29 March: 09:00 local is 08:00Z, then 07:00Z.
    assert starts == [
        "2026-03-16T08:00:00+00:00",
        "2026-03-23T08:00:00+00:00",
        "2026-03-30T07:00:00+00:00",
        "2026-04-13T07:00:00+00:00",
    ], "5 Mondays at 09:00 Paris, 6 April excluded"
    assert all(e["recurring"] and e["summary"] == "Standup" for e in listed)


async def test_an_edit_made_on_the_server_meanwhile_is_a_conflict(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    created = await butler.call(
        "calendar_create_event",
        {"summary": "Review", "start": "2026-08-03T14:00:00", "end": "2026-08-03T15:00:00"},
    )
    [on_server] = await asyncio.to_thread(calendar.events)
    on_server.data = on_server.data.replace("SUMMARY:Review", "SUMMARY:Review (moved by Ann)")
    await asyncio.to_thread(on_server.save)

    refused = await butler.call_raw(
        "calendar_update_event", {"event_id": created["event_id"], "summary": "Review v2"}
    )
    assert refused.is_error and "conflict" in refused.content[0].text
    [event] = await asyncio.to_thread(_events_on_server, calendar)
    assert str(event["SUMMARY"]) == "Review (moved by Ann)", "the server's edit is kept"
    [listed] = await _list(butler, "2026-08-03T00:00:00Z", "2026-08-04T00:00:00Z")
    assert listed["summary"] == "Review (moved by Ann)", "the local copy took the server's"
    # Now that the butler has read the server's version, its edit goes through.
    await butler.call(
        "calendar_update_event", {"event_id": created["event_id"], "summary": "Review v2"}
    )
    [event] = await asyncio.to_thread(_events_on_server, calendar)
    assert str(event["SUMMARY"]) == "Review v2" and int(event["SEQUENCE"]) >= 1


async def _pending(butler: ModuleButler, tool: str) -> dict[str, Any]:
    for _ in range(200):
        rows = await butler.call("approval_list", {"status": "pending"})
        found = [row for row in rows if row["tool_name"] == tool]
        if found:
            return dict(found[0])
        await asyncio.sleep(0.05)
    raise AssertionError(f"no pending approval for {tool}")


async def test_deleting_needs_the_owners_approval(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    created = await butler.call(
        "calendar_create_event",
        {"summary": "Gym", "start": "2026-09-01T07:00:00", "end": "2026-09-01T08:00:00"},
    )
    call = asyncio.create_task(
        butler.call("calendar_delete_event", {"event_id": created["event_id"]})
    )
    row = await _pending(butler, "calendar_delete_event")
    assert len(await asyncio.to_thread(calendar.events)) == 1, "held: nothing deleted yet"
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "approved", "decided_by": "me"}
    )
    assert (await asyncio.wait_for(call, 10))["deleted"] is True
    assert await asyncio.to_thread(calendar.events) == []
    assert await _list(butler, "2026-09-01T00:00:00Z", "2026-09-02T00:00:00Z") == []


async def test_inviting_someone_is_held_for_approval(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    call = asyncio.create_task(
        butler.call(
            "calendar_create_event",
            {
                "summary": "Dinner",
                "start": "2026-09-02T19:00:00",
                "end": "2026-09-02T21:00:00",
                "attendees": [{"email": "eve@example.org", "name": "Eve"}],
            },
        )
    )
    row = await _pending(butler, "calendar_create_event")
    assert await asyncio.to_thread(calendar.events) == []
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "approved", "decided_by": "me"}
    )
    created = await asyncio.wait_for(call, 10)
    assert created["attendees"][0]["email"] == "eve@example.org"
    [event] = await asyncio.to_thread(_events_on_server, calendar)
    assert str(event["ATTENDEE"]) == "mailto:eve@example.org"


async def test_free_slots_avoid_busy_times_within_working_hours(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, _ = await _butler(module_butler, radicale)
    for start, end in (("10:00", "11:00"), ("10:30", "12:00"), ("14:00", "16:30")):
        await butler.call(
            "calendar_create_event",
            {"summary": "busy", "start": f"2026-10-05T{start}:00", "end": f"2026-10-05T{end}:00"},
        )
    result = await butler.call(
        "calendar_free_slots",
        {"start": "2026-10-05T00:00:00", "end": "2026-10-06T00:00:00", "duration_minutes": 60},
    )
    spans = [(s["start"][11:16], s["end"][11:16]) for s in result["slots"]]
    assert spans == [("09:00", "10:00"), ("12:00", "14:00")]


async def _approve_when_held(butler: ModuleButler, tool: str, arguments: dict[str, Any]) -> Any:
    call = asyncio.create_task(butler.call(tool, arguments))
    row = await _pending(butler, tool)
    await butler.call(
        "approval_decide", {"approval_id": row["id"], "decision": "approved", "decided_by": "me"}
    )
    return await asyncio.wait_for(call, 10)


async def test_one_occurrence_is_moved_and_another_cancelled_the_series_kept(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    await asyncio.to_thread(calendar.save_event, WEEKLY)
    await butler.call("calendar_sync")
    window = ("2026-03-01T00:00:00Z", "2026-05-01T00:00:00Z")
    listed = await _list(butler, *window)
    by_start = {e["starts_at"]: e for e in listed}
    after_dst = by_start["2026-03-30T07:00:00+00:00"]
    event_id = after_dst["event_id"]

    moved = await butler.call(
        "calendar_update_occurrence",
        {
            "event_id": event_id,
            "recurrence_id": after_dst["recurrence_id"],
            "start": "2026-03-31T10:00:00",
            "summary": "Standup (Tuesday)",
        },
    )
    assert (moved["starts_at"], moved["ends_at"]) == (
        "2026-03-31T08:00:00+00:00",
        "2026-03-31T08:30:00+00:00",
    ), "moved to Tuesday 10:00 Paris, its 30 minutes kept"
    vevents = await asyncio.to_thread(_events_on_server, calendar)
    [master] = [v for v in vevents if "RECURRENCE-ID" not in v]
    [override] = [v for v in vevents if "RECURRENCE-ID" in v]
    assert override["RECURRENCE-ID"].dt == datetime(2026, 3, 30, 9, tzinfo=PARIS)
    assert override["DTSTART"].dt == datetime(2026, 3, 31, 10, tzinfo=PARIS)
    assert str(override["SUMMARY"]) == "Standup (Tuesday)"
    assert str(master["SUMMARY"]) == "Standup" and "RRULE" in master, "the series unchanged"
    assert [(e["starts_at"], e["summary"]) for e in await _list(butler, *window)] == [
        ("2026-03-16T08:00:00+00:00", "Standup"),
        ("2026-03-23T08:00:00+00:00", "Standup"),
        ("2026-03-31T08:00:00+00:00", "Standup (Tuesday)"),
        ("2026-04-13T07:00:00+00:00", "Standup"),
    ]

    cancelled = await _approve_when_held(
        butler,
        "calendar_cancel_occurrence",
        {
            "event_id": event_id,
            "recurrence_id": by_start["2026-03-23T08:00:00+00:00"]["recurrence_id"],
        },
    )
    assert cancelled["cancelled"] is True
    # Cancelling the moved occurrence drops its override and excludes its original date.
    await _approve_when_held(
        butler,
        "calendar_cancel_occurrence",
        {"event_id": event_id, "recurrence_id": after_dst["recurrence_id"]},
    )
    [master] = await asyncio.to_thread(_events_on_server, calendar)
    excluded = {d.dt for entry in master["EXDATE"] for d in entry.dts}
    assert excluded == {
        datetime(2026, 4, 6, 9, tzinfo=PARIS),
        datetime(2026, 3, 23, 9, tzinfo=PARIS),
        datetime(2026, 3, 30, 9, tzinfo=PARIS),
    }
    assert [e["starts_at"] for e in await _list(butler, *window)] == [
        "2026-03-16T08:00:00+00:00",
        "2026-04-13T07:00:00+00:00",
    ]
    # What cannot be named is refused with what to do.
    gone = await butler.call_raw(
        "calendar_update_occurrence",
        {"event_id": event_id, "recurrence_id": after_dst["recurrence_id"], "summary": "x"},
    )
    assert gone.is_error and "no occurrence starting" in gone.content[0].text
    single = await butler.call(
        "calendar_create_event",
        {"summary": "Once", "start": "2026-04-20T10:00:00", "end": "2026-04-20T11:00:00"},
    )
    refused = await butler.call_raw(
        "calendar_update_occurrence",
        {
            "event_id": single["event_id"],
            "recurrence_id": "2026-04-20T08:00:00+00:00",
            "summary": "x",
        },
    )
    assert refused.is_error and "does not recur" in refused.content[0].text


BUSY_DAY = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:{uid}
DTSTAMP:20260101T000000Z
DTSTART:{start}
DTEND:{end}
SUMMARY:{uid}
{extra}END:VEVENT
END:VCALENDAR
"""
BUSY_EVENTS = (
    ("meeting", "20261005T100000Z", "20261005T110000Z", ""),
    ("overlap", "20261005T103000Z", "20261005T113000Z", ""),
    ("maybe", "20261005T120000Z", "20261005T130000Z", "STATUS:TENTATIVE\n"),
    ("reading", "20261005T140000Z", "20261005T150000Z", "TRANSP:TRANSPARENT\n"),
    ("called-off", "20261005T160000Z", "20261005T170000Z", "STATUS:CANCELLED\n"),
    ("run", "20261005T060000Z", "20261005T063000Z", "RRULE:FREQ=DAILY;COUNT=3\n"
     "EXDATE:20261006T060000Z\n"),
)  # fmt: skip
EXPECTED_BUSY = [
    ("2026-10-05T06:00:00+00:00", "2026-10-05T06:30:00+00:00", "BUSY"),
    ("2026-10-05T10:00:00+00:00", "2026-10-05T11:30:00+00:00", "BUSY"),
    ("2026-10-05T12:00:00+00:00", "2026-10-05T13:00:00+00:00", "BUSY-TENTATIVE"),
    ("2026-10-07T06:00:00+00:00", "2026-10-07T06:30:00+00:00", "BUSY"),
]


def _utc_periods(answer: dict[str, Any]) -> list[tuple[str, str, str]]:
    [calendar] = answer["calendars"]
    return [
        (
            datetime.fromisoformat(p["start"]).astimezone(ZoneInfo("UTC")).isoformat(),
            datetime.fromisoformat(p["end"]).astimezone(ZoneInfo("UTC")).isoformat(),
            p["type"],
        )
        for p in calendar["busy"]
    ]


def _refusing_free_busy(radicale: RadicaleServer) -> Any:
    """Radicale behind a proxy that answers the free-busy report as a server without it."""
    upstream = httpx.AsyncClient(base_url=radicale.url)

    async def forward(request: Request) -> Response:
        body = await request.body()
        if request.method == "REPORT" and b"free-busy-query" in body:
            return Response("report not supported", status_code=501)
        keep = ("content-type", "depth", "if-match", "if-none-match", "authorization")
        answer = await upstream.request(
            request.method,
            request.url.path,
            content=body,
            headers={k: v for k, v in request.headers.items() if k in keep},
        )
        headers = {k: v for k, v in answer.headers.items() if k in ("content-type", "etag")}
        return Response(answer.content, status_code=answer.status_code, headers=headers)

    methods = ["GET", "PUT", "DELETE", "PROPFIND", "REPORT", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])


async def test_free_busy_comes_from_the_server_else_from_the_local_copy_saying_so(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    butler, calendar = await _butler(module_butler, radicale)
    for uid, start, end, extra in BUSY_EVENTS:
        ics = BUSY_DAY.format(uid=uid, start=start, end=end, extra=extra)
        await asyncio.to_thread(calendar.save_event, ics)
    await butler.call("calendar_sync")
    window = {"start": "2026-10-05T00:00:00Z", "end": "2026-10-08T00:00:00Z"}
    answer = await butler.call("calendar_free_busy", window)
    assert answer["calendars"][0]["source"] == "server"
    assert answer["calendars"][0]["reason"] is None
    assert _utc_periods(answer) == EXPECTED_BUSY, "overlaps merged; free time left out"

    owner = str(calendar.url).rstrip("/").split("/")[-2]
    async with served_asgi(_refusing_free_busy(radicale)) as url:
        # A second butler reads the same calendar through a proxy without the report.
        other = await module_butler(
            {
                "approvals": {},
                "calendar": {
                    "url": f"{url}/{owner}/",
                    "usernameEnv": "CAL_USER",
                    "timezone": "Europe/Paris",
                    "syncIntervalSeconds": 0,
                },
            },
            environ={"CAL_USER": owner},
        )
        await other.call("calendar_sync")
        local = await other.call("calendar_free_busy", window)
        [entry] = local["calendars"]
        assert entry["source"] == "local copy"
        assert "no free-busy report" in entry["reason"] and "501" in entry["reason"]
        assert _utc_periods(local) == EXPECTED_BUSY, "the same periods, computed locally"
    missing = await butler.call_raw("calendar_free_busy", {**window, "calendar": "work"})
    assert missing.is_error and "calendars: home" in missing.content[0].text
