"""The butler's own starts (table `butler_starts`): restarts survive any dashboard."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from pydantic import JsonValue

from butlers import __version__

KEPT_STARTS = 1000  # rows kept; `number` keeps counting past them


@dataclass(frozen=True, slots=True)
class StartRecord:
    number: int  # 1 for the first start of this butler, ever
    started_at: datetime
    # The start before this one, and whether that run ended without a clean stop.
    previous_started_at: datetime | None
    previous_crashed: bool

    @property
    def restarts(self) -> int:
        return self.number - 1

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "restarts": self.restarts,
            "started_at": self.started_at.isoformat(),
            "previous_started_at": self.previous_started_at.isoformat()
            if self.previous_started_at
            else None,
            "previous_crashed": self.previous_crashed,
        }


async def record_start(pool: asyncpg.Pool) -> StartRecord:
    """Number this start after the last one (one transaction, serialized by a lock)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("LOCK TABLE butler_starts IN SHARE ROW EXCLUSIVE MODE")
        previous = await conn.fetchrow(
            "SELECT number, started_at, stopped_at FROM butler_starts ORDER BY number DESC LIMIT 1"
        )
        number = (previous["number"] if previous else 0) + 1
        started_at = await conn.fetchval(
            "INSERT INTO butler_starts (number, pid, version) VALUES ($1, $2, $3) "
            "RETURNING started_at",
            number,
            os.getpid(),
            __version__,
        )
        await conn.execute("DELETE FROM butler_starts WHERE number <= $1", number - KEPT_STARTS)
    return StartRecord(
        number=number,
        started_at=started_at,
        previous_started_at=previous["started_at"] if previous else None,
        previous_crashed=previous is not None and previous["stopped_at"] is None,
    )


async def record_stop(pool: asyncpg.Pool, number: int) -> None:
    await pool.execute(
        "UPDATE butler_starts SET stopped_at = clock_timestamp() WHERE number = $1", number
    )
