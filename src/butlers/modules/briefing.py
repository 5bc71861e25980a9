"""What a module contributes to the owner's morning briefing, as data.

A module that has something to say each morning registers a `BriefingSource` under
its own name in `ModuleServices.briefings` (the way channels register): an async
function of the day and the owner's time zone returning a few short lines (empty:
nothing today). The reminders module serves every source of its butler through its
`briefing_sections` tool; the briefing job gathers them across butlers. No FastMCP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

MAX_LINES = 12  # a section is short: the model writes one message from all of them

BriefingSource = Callable[[date, ZoneInfo], Awaitable[list[str]]]


@dataclass(frozen=True)
class Section:
    """One module's part of the briefing on one butler; `skipped` says why it is empty
    for a reason other than having nothing to say."""

    butler: str
    module: str
    lines: list[str]
    skipped: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "butler": self.butler,
            "module": self.module,
            "lines": self.lines[:MAX_LINES],
            "skipped": self.skipped,
        }


def day_bounds(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[start, end) of `day` in `tz`, as aware datetimes."""
    start = datetime.combine(day, time(0), tzinfo=tz)
    return start, datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)
