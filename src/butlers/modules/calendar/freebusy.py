"""Free/busy time of the owner's calendars: asked of the server, else read from the copy.

The server's answer (RFC 4791 free-busy-query) counts what the butler may not hold (a
calendar it cannot read in full, events outside its sync window). A server without the
report gets the same periods computed from the local copy, and the answer says which of
the two each calendar's periods came from, and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from icalendar import Calendar

from butlers.modules.calendar.caldav import CalDavClient, CalDavError, Unsupported
from butlers.modules.calendar.store import CalendarStore, Source

BUSY_TYPES = ("BUSY", "BUSY-TENTATIVE", "BUSY-UNAVAILABLE")
MAX_PERIODS = 2000  # per calendar


@dataclass(frozen=True, slots=True)
class Period:
    start: datetime
    end: datetime
    kind: str  # FBTYPE: BUSY, BUSY-TENTATIVE or BUSY-UNAVAILABLE


@dataclass(frozen=True, slots=True)
class CalendarBusy:
    calendar: str
    source: str  # "server" (its free-busy report) or "local copy"
    reason: str | None  # why the local copy was used
    periods: list[Period]


def parse_vfreebusy(text: str, start: datetime, end: datetime) -> list[Period]:
    """The busy periods of a VFREEBUSY answer, clipped to [start, end), merged per type."""
    try:
        calendar: Any = Calendar.from_ical(text)
    except ValueError as exc:
        raise CalDavError(f"the free-busy answer is not iCalendar: {exc}") from exc
    found: list[Period] = []
    for component in calendar.walk("VFREEBUSY"):
        entries = component.get("FREEBUSY")
        for entry in entries if isinstance(entries, list) else [entries] if entries else []:
            kind = str(entry.params.get("FBTYPE", "BUSY")).upper()
            begin, finish = entry.dt
            if not isinstance(finish, datetime):
                finish = begin + finish  # a start and a duration
            if kind in BUSY_TYPES:
                found.append(Period(_aware(begin), _aware(finish), kind))
    return merge(found, start, end)


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def merge(periods: list[Period], start: datetime, end: datetime) -> list[Period]:
    """Overlapping periods of one type joined, clipped to [start, end), earliest first."""
    merged: list[Period] = []
    for kind in BUSY_TYPES:
        ranges = sorted(
            (max(p.start, start), min(p.end, end))
            for p in periods
            if p.kind == kind and p.end > start and p.start < end
        )
        current: list[datetime] | None = None
        for begin, finish in ranges:
            if current is not None and begin <= current[1]:
                current[1] = max(current[1], finish)
                continue
            if current is not None:
                merged.append(Period(current[0], current[1], kind))
            current = [begin, finish]
        if current is not None:
            merged.append(Period(current[0], current[1], kind))
    merged.sort(key=lambda p: (p.start, p.end, p.kind))
    return merged[:MAX_PERIODS]


async def local_periods(
    store: CalendarStore, source: Source, start: datetime, end: datetime
) -> list[Period]:
    """What the server would answer, from the expanded events of the local copy:
    transparent and cancelled events are free, tentative ones BUSY-TENTATIVE."""
    rows = await store.busy_instances(source.id, start, end, MAX_PERIODS * 4)
    periods = [
        Period(begin, finish, "BUSY-TENTATIVE" if status == "TENTATIVE" else "BUSY")
        for begin, finish, status in rows
    ]
    return merge(periods, start, end)


async def free_busy(
    client: CalDavClient,
    store: CalendarStore,
    sources: list[Source],
    start: datetime,
    end: datetime,
) -> list[CalendarBusy]:
    found = []
    for source in sources:
        try:
            text = await client.free_busy(source.href, start, end)
            periods = parse_vfreebusy(text, start, end)
            found.append(CalendarBusy(source.name, "server", None, periods))
        except CalDavError as exc:
            why = "the server has no free-busy report" if isinstance(exc, Unsupported) else None
            reason = f"{why or 'the server could not answer'}: {exc}"
            periods = await local_periods(store, source, start, end)
            found.append(CalendarBusy(source.name, "local copy", reason[:500], periods))
    return found
