"""Deterministic Python jobs that `job` schedules run without an LLM.

A job is `async def job(ctx: JobContext, **args) -> JsonValue`; the registry is
built explicitly (`builtin_jobs()`), never at import time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from butlers.db.pool import dumps


@dataclass(frozen=True)
class JobContext:
    butler: str
    pool: asyncpg.Pool
    task_name: str


Job = Callable[..., Awaitable[Any]]


class UnknownJob(LookupError):
    pass


class JobRegistry:
    def __init__(self, jobs: dict[str, Job] | None = None) -> None:
        self._jobs: dict[str, Job] = dict(jobs or {})

    def register(self, name: str, job: Job) -> None:
        self._jobs[name] = job

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def get(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(
                f"no job {name!r}; registered jobs: {', '.join(self.names()) or 'none'}"
            ) from None


async def state_snapshot(ctx: JobContext, key: str = "snapshot:state") -> dict[str, Any]:
    """Copy the count and keys of the state store under `key` (a heartbeat of sorts)."""
    keys = [r["key"] for r in await ctx.pool.fetch("SELECT key FROM state ORDER BY key")]
    keys = [k for k in keys if k != key]
    value = {"count": len(keys), "keys": keys[:100], "task": ctx.task_name}
    await ctx.pool.execute(
        "INSERT INTO state (key, value) VALUES ($1, $2::text::jsonb) ON CONFLICT (key) DO UPDATE "
        "SET value = EXCLUDED.value, updated_at = clock_timestamp()",
        key,
        dumps(value),
    )
    return value


async def prune_sessions(ctx: JobContext, keep_days: int = 30) -> dict[str, Any]:
    """Delete finished sessions older than `keep_days`."""
    status = await ctx.pool.execute(
        "DELETE FROM sessions WHERE status <> 'running' "
        "AND created_at < now() - make_interval(days => $1)",
        int(keep_days),
    )
    return {"deleted": int(status.split()[-1])}


def builtin_jobs() -> JobRegistry:
    return JobRegistry({"state_snapshot": state_snapshot, "prune_sessions": prune_sessions})
