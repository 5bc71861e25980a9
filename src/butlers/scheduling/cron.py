"""Next due times of cron schedules, in UTC, staggered deterministically per butler.

Butlers sharing a cron expression would otherwise all call their LLM at the same
second. Each butler shifts its fire times by an offset derived from a hash of its
name: the same for every restart, at most 15 minutes and always shorter than the
cron's interval (so a schedule never skips or doubles a cycle).

croniter (with dateutil, ~0.9 MB) is imported by the first computation, so a butler
without schedules never loads it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from itertools import pairwise

MAX_STAGGER = timedelta(minutes=15)


def cron_interval(cron: str, base: datetime) -> timedelta:
    """The shortest gap between consecutive fire times seen over a few cycles after `base`."""
    from croniter import croniter

    it = croniter(cron, base)
    times: list[datetime] = [it.get_next(datetime) for _ in range(4)]
    return min(b - a for a, b in pairwise(times))


def stagger_offset(butler: str, cron: str, base: datetime | None = None) -> timedelta:
    base = base or datetime.now(UTC)
    bound = min(MAX_STAGGER, cron_interval(cron, base))
    bound_seconds = int(bound.total_seconds())
    if bound_seconds <= 1:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(butler.encode()).digest()[:8], "big")
    return timedelta(seconds=digest % bound_seconds)  # < bound


def next_due(cron: str, butler: str, after: datetime | None = None) -> datetime:
    """The first staggered fire time strictly after `after` (default now), UTC."""
    after = (after or datetime.now(UTC)).astimezone(UTC)
    offset = stagger_offset(butler, cron, after)
    from croniter import croniter

    unshifted: datetime = croniter(cron, after - offset).get_next(datetime)
    return (unshifted + offset).astimezone(UTC)


def fire_times(
    cron: str, butler: str, start: datetime, end: datetime, limit: int = 500
) -> list[datetime]:
    """Staggered fire times in [start, end), at most `limit` (a schedule's calendar entries)."""
    from croniter import croniter

    start, end = start.astimezone(UTC), end.astimezone(UTC)
    offset = stagger_offset(butler, cron, start)
    it = croniter(cron, start - offset - timedelta(seconds=1))
    found: list[datetime] = []
    while len(found) < limit:
        moment = (it.get_next(datetime) + offset).astimezone(UTC)
        if moment >= end:
            break
        if moment >= start:
            found.append(moment)
    return found
