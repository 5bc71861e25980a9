"""Deterministic Python jobs that `job` schedules run without an LLM.

A job is `async def job(ctx: JobContext, **args) -> JsonValue`; the registry is
built explicitly (`builtin_jobs()`), never at import time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import asyncpg
from pydantic import Field, ValidationError

from butlers.db.pool import dumps
from butlers.signatures import Validator, arguments_validator, describe


@dataclass(frozen=True)
class JobContext:
    butler: str
    pool: asyncpg.Pool
    task_name: str


Job = Callable[..., Awaitable[Any]]


class UnknownJob(LookupError):
    pass


class InvalidJobArguments(ValueError):
    """A job's arguments do not fit its signature; the message names each argument."""


class JobRegistry:
    def __init__(self, jobs: dict[str, Job] | None = None) -> None:
        self._jobs: dict[str, Job] = {}
        self._validators: dict[str, Validator] = {}
        # Jobs of a module the owner switched off: schedules naming them still
        # validate, a firing fails with the reason.
        self._parked: dict[str, str] = {}
        for name, job in (jobs or {}).items():
            self.register(name, job)

    def register(self, name: str, job: Job) -> None:
        self._jobs[name] = job
        self._validators[name] = arguments_validator(job, skip=("ctx",))
        self._parked.pop(name, None)

    def park(self, name: str, reason: str) -> None:
        """Take `name` out of service (`get` raises UnknownJob with `reason`) while
        schedules naming it stay valid; `register` brings it back."""
        self._jobs.pop(name, None)
        self._parked[name] = reason

    def validate(self, name: str, args: dict[str, Any]) -> None:
        """Raise UnknownJob or InvalidJobArguments (bounds included) before anything
        stores or runs these arguments."""
        if name in self._parked and name not in self._validators:
            return  # never registered in this process: its arguments are checked once it is
        if name not in self._parked:
            self.get(name)
        try:
            self._validators[name](dict(args))
        except ValidationError as exc:
            raise InvalidJobArguments(f"job {name!r}: {describe(exc)}") from None

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def get(self, name: str) -> Job:
        if name in self._parked:
            raise UnknownJob(f"job {name!r} is off: {self._parked[name]}")
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(
                f"no job {name!r}; registered jobs: {', '.join(self.names()) or 'none'}"
            ) from None


async def state_snapshot(
    ctx: JobContext, key: Annotated[str, Field(min_length=1, max_length=512)] = "snapshot:state"
) -> dict[str, Any]:
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


async def prune_sessions(
    ctx: JobContext, keep_days: Annotated[int, Field(ge=1, le=36500)] = 30
) -> dict[str, Any]:
    """Delete finished sessions older than `keep_days` (at least one day: a job never
    wipes the session log)."""
    status = await ctx.pool.execute(
        "DELETE FROM sessions WHERE status <> 'running' "
        "AND created_at < now() - make_interval(days => $1)",
        int(keep_days),
    )
    return {"deleted": int(status.split()[-1])}


def builtin_jobs() -> JobRegistry:
    return JobRegistry({"state_snapshot": state_snapshot, "prune_sessions": prune_sessions})
