"""What a butler itself has on the calendar: its schedules' fire times and its reminders.

Shown beside the owner's events, by the calendar tools and the dashboard's workspace.
Each entry source is a function `(reader, butler, start, end, limit) -> entries`;
`SOURCES` lists them. A butler feature that puts something on the calendar (reminders,
for one) adds its source there and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from butlers.scheduling.cron import fire_times

ENTRY_MINUTES = 15  # how long a schedule's entry is drawn


class Reader(Protocol):
    async def fetch(self, query: str, *args: Any) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class ButlerEntry:
    butler: str
    kind: str  # "schedule" (a cron schedule's run) or "reminder" (a pending reminder)
    ref: str  # what the entry belongs to: the schedule's or the reminder's id
    title: str
    starts_at: datetime
    ends_at: datetime
    enabled: bool
    detail: str | None
    recurring: bool = False


Source = Callable[[Reader, str, datetime, datetime, int], Awaitable[list[ButlerEntry]]]


async def schedule_entries(
    reader: Reader, butler: str, start: datetime, end: datetime, limit: int
) -> list[ButlerEntry]:
    """Fire times of the butler's schedules (disabled ones too, marked so)."""
    rows = await reader.fetch(
        "SELECT id, name, cron, enabled, prompt, job_name FROM scheduled_tasks ORDER BY name"
    )
    entries = []
    for row in rows:
        for moment in fire_times(row["cron"], butler, start, end, limit):
            entries.append(
                ButlerEntry(
                    butler=butler,
                    kind="schedule",
                    ref=str(row["id"]),
                    title=row["name"],
                    starts_at=moment,
                    ends_at=moment + timedelta(minutes=ENTRY_MINUTES),
                    enabled=row["enabled"],
                    detail=(row["job_name"] and f"job {row['job_name']}") or row["prompt"],
                    recurring=True,
                )
            )
    return entries


def _occurrences(row: Any, lo: datetime, hi: datetime, limit: int) -> list[datetime]:
    """A recurring reminder's occurrences in [lo, hi): wall-clock times in its zone from
    its first due time (the rule was checked when the reminder was made)."""
    from dateutil.rrule import rrulestr

    tz = ZoneInfo(row["time_zone"])
    body = row["rrule"].strip().removeprefix("RRULE:")
    rule = rrulestr(body, dtstart=row["first_due_at"].astimezone(tz).replace(microsecond=0))
    found: list[datetime] = []
    for moment in rule.xafter(lo.astimezone(tz), inc=True):
        if moment >= hi or len(found) >= limit:
            break
        found.append(moment.astimezone(UTC))
    return found


async def reminder_entries(
    reader: Reader, butler: str, start: datetime, end: datetime, limit: int
) -> list[ButlerEntry]:
    """Pending reminders due in the window: a one-shot once, a recurring one at each of
    its occurrences from the next one on (none when the butler has no reminders module)."""
    [present] = await reader.fetch("SELECT to_regclass('reminders') IS NOT NULL")
    if not present[0]:
        return []
    rows = await reader.fetch(
        "SELECT id, text, rrule, time_zone, first_due_at, next_due_at FROM reminders "
        "WHERE status = 'pending' AND next_due_at < $2 "
        "AND (rrule IS NOT NULL OR next_due_at >= $1) ORDER BY next_due_at LIMIT $3",
        start,
        end,
        limit,
    )
    entries = []
    for row in rows:
        moments = [row["next_due_at"]]
        if row["rrule"]:
            lo = max(start, row["next_due_at"])
            moments = _occurrences(row, lo, end, limit)
        for moment in moments:
            entries.append(
                ButlerEntry(
                    butler=butler,
                    kind="reminder",
                    ref=str(row["id"]),
                    title=row["text"][:200],
                    starts_at=moment,
                    ends_at=moment + timedelta(minutes=ENTRY_MINUTES),
                    enabled=True,
                    detail=row["rrule"] and f"repeats {row['rrule']}",
                    recurring=bool(row["rrule"]),
                )
            )
    return entries


SOURCES: tuple[Source, ...] = (schedule_entries, reminder_entries)


async def butler_entries(
    reader: Reader, butler: str, start: datetime, end: datetime, limit: int = 500
) -> list[ButlerEntry]:
    """Every source's entries within [start, end), earliest first, at most `limit`."""
    found: list[ButlerEntry] = []
    for source in SOURCES:
        found.extend(await source(reader, butler, start, end, limit))
    found.sort(key=lambda entry: (entry.starts_at, entry.title))
    return found[:limit]
