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
from typing import Any

import asyncpg

from butlers.core.spawner import NoRuntimeConfigured, Spawner
from butlers.scheduling.jobs import JobContext, JobRegistry
from butlers.stores.schedules import ScheduleStore

log = logging.getLogger(__name__)
JOB_TIMEOUT = 300.0


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

    async def tick(self) -> list[dict[str, Any]]:
        """Run every task due now; returns one summary per task run."""
        claimed = await self.store.claim_due()
        return [await self._run(task) for task in claimed]

    async def _run(self, task: dict[str, Any]) -> dict[str, Any]:
        name = task["name"]
        session_id: uuid.UUID | None = None
        error: str | None = None
        try:
            if task["job_name"]:
                job = self._jobs.get(task["job_name"])
                ctx = JobContext(butler=self._butler, pool=self._pool, task_name=name)
                async with asyncio.timeout(JOB_TIMEOUT):
                    await job(ctx, **(task["job_args"] or {}))
            else:
                result = await self._spawner.trigger(
                    task["prompt"], trigger_source=f"schedule:{name}"
                )
                session_id = uuid.UUID(result.session_id)
                error = result.error
        except NoRuntimeConfigured as exc:
            error = str(exc)
        except TimeoutError:
            error = "timeout"
        except Exception as exc:
            error = f"{exc.__class__.__name__}: {exc}"
            log.exception("scheduled task %s failed", name)
        finished = await asyncio.shield(
            self.store.finish(task["id"], ok=error is None, error=error, session_id=session_id)
        )
        return {
            "name": name,
            "status": "completed" if error is None else "error",
            "error": error,
            "session_id": None if session_id is None else str(session_id),
            "next_due_at": finished["next_due_at"].isoformat() if finished else None,
        }

    def start(self) -> None:
        """Start the background loop; `aclose()` stops it."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"scheduler {self._butler}")

    async def _loop(self) -> None:
        while True:
            try:
                ran = await self.tick()
                if ran:
                    log.info("tick ran %s", ", ".join(f"{r['name']}={r['status']}" for r in ran))
            except Exception:  # the loop outlives any one failed tick
                log.exception("tick failed")
            await asyncio.sleep(self._interval)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
