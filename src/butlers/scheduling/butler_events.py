"""What a butler itself has on the calendar: its schedules' fire times (and reminders).

Shown beside the owner's events, by the calendar tools and the dashboard's workspace.
Each entry source is a function `(reader, butler, start, end, limit) -> entries`;
`SOURCES` lists them. A butler feature that puts something on the calendar (reminders,
for one) adds its source there and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from butlers.scheduling.cron import fire_times

ENTRY_MINUTES = 15  # how long a schedule's entry is drawn


class Reader(Protocol):
    async def fetch(self, query: str, *args: Any) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class ButlerEntry:
    butler: str
    kind: str  # "schedule" (a cron schedule's run); reminders add "reminder"
    ref: str  # what the entry belongs to: the schedule's id
    title: str
    starts_at: datetime
    ends_at: datetime
    enabled: bool
    detail: str | None


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
                )
            )
    return entries


SOURCES: tuple[Source, ...] = (schedule_entries,)


async def butler_entries(
    reader: Reader, butler: str, start: datetime, end: datetime, limit: int = 500
) -> list[ButlerEntry]:
    """Every source's entries within [start, end), earliest first, at most `limit`."""
    found: list[ButlerEntry] = []
    for source in SOURCES:
        found.extend(await source(reader, butler, start, end, limit))
    found.sort(key=lambda entry: (entry.starts_at, entry.title))
    return found[:limit]
