"""The scheduler: a tick claims due tasks and runs them; a background loop ticks.

`job` tasks call a registered Python job directly (no LLM); `prompt` tasks go
through the spawner with `trigger_source="schedule:<name>"`, queuing on its FIFO
lock behind (and ahead of) external triggers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import Literal

import asyncpg

from butlers.core.spawner import NoRuntimeConfigured, Spawner, SpawnerBusy
from butlers.scheduling.jobs import JobContext, JobRegistry
from butlers.stores.schedules import ScheduledTask, ScheduleStore

log = logging.getLogger(__name__)
JOB_TIMEOUT = 300.0


@dataclass(frozen=True)
class TaskRun:
    """One task a tick ran, as `tick` reports it."""

    name: str
    status: Literal["completed", "error"]
    error: str | None
    session_id: str | None
    next_due_at: str | None  # ISO 8601, when the task runs next


class Scheduler:
    def __init__(
        self,
        *,
        butler: str,
        pool: asyncpg.Pool,
        store: ScheduleStore,
        spawner: Spawner,
        jobs: JobRegistry,
        interval: float,
    ) -> None:
        self._butler = butler
        self._pool = pool
        self.store = store
        self._spawner = spawner
        self._jobs = jobs
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    async def tick(self) -> list[TaskRun]:
        """Run every task due now; returns one summary per task run."""
        claimed = await self.store.claim_due()
        return [await self._run(task) for task in claimed]

    async def _run(self, task: ScheduledTask) -> TaskRun:
        name = task.name
        session_id: uuid.UUID | None = None
        error: str | None = None
        try:
            if task.job_name:
                job = self._jobs.get(task.job_name)
                # Stored arguments are checked again: rows may predate a tighter bound.
                self._jobs.validate(task.job_name, task.job_args or {})
                ctx = JobContext(butler=self._butler, pool=self._pool, task_name=name)
                async with asyncio.timeout(JOB_TIMEOUT):
                    await job(ctx, **(task.job_args or {}))
            else:
                # One session per firing: a firing re-claimed after a crash finds the
                # interrupted session under this key instead of running a second one.
                due = task.next_due_at.isoformat() if task.next_due_at else "unscheduled"
                result = await self._spawner.trigger(
                    task.prompt or "",
                    trigger_source=f"schedule:{name}",
                    idempotency_key=f"schedule:{task.id}:{due}",
                )
                session_id = uuid.UUID(result.session_id)
                error = result.error
        except (NoRuntimeConfigured, SpawnerBusy) as exc:
            error = str(exc)
        except TimeoutError:
            error = "timeout"
        except Exception as exc:
            error = f"{exc.__class__.__name__}: {exc}"
            log.exception("scheduled task %s failed", name)
        finished = await asyncio.shield(
            self.store.finish(task.id, ok=error is None, error=error, session_id=session_id)
        )
        return TaskRun(
            name=name,
            status="completed" if error is None else "error",
            error=error,
            session_id=None if session_id is None else str(session_id),
            next_due_at=finished.next_due_at.isoformat() if finished else None,
        )

    def start(self) -> None:
        """Start the background loop; `aclose()` stops it."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"scheduler {self._butler}")

    async def _loop(self) -> None:
        while True:
            try:
                await self._spawner.recover()  # rows whose final write never landed
                ran = await self.tick()
                if ran:
                    log.info("tick ran %s", ", ".join(f"{r.name}={r.status}" for r in ran))
            except Exception:  # the loop outlives any one failed tick
                log.exception("tick failed")
            await asyncio.sleep(self._interval)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
