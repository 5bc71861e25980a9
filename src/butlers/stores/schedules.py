"""Scheduled tasks of one butler (table `scheduled_tasks`): spec sync, CRUD, claiming."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.db.sql import affected
from butlers.spec import ScheduleSpec
from butlers.stores.records import Record

NextDue = Callable[[str], datetime]


@dataclass(frozen=True, slots=True)
class ScheduledTask(Record):
    id: uuid.UUID
    name: str
    cron: str
    prompt: str | None
    job_name: str | None
    job_args: dict[str, JsonValue]
    source: str  # "spec" | "runtime"
    enabled: bool
    status: str  # "pending" | "running" | "completed" | "error"
    next_due_at: datetime
    last_run_at: datetime | None
    last_session_id: uuid.UUID | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime


COLUMNS = ScheduledTask.columns()


class DuplicateSchedule(ValueError):
    pass


class ScheduleStore:
    def __init__(self, pool: asyncpg.Pool, next_due: NextDue) -> None:
        self._pool = pool
        self._next_due = next_due

    async def sync_spec(self, schedules: list[ScheduleSpec]) -> None:
        """Make the `source='spec'` rows match the spec; idempotent, one transaction.

        A spec row keeps its `next_due_at` unless its cron changed; tasks left
        `running` by a previous process (crash, kill) go back to `pending`.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE scheduled_tasks SET status = 'pending' WHERE status = 'running'"
            )
            for s in schedules:
                await conn.execute(
                    """
                    INSERT INTO scheduled_tasks
                        (name, cron, prompt, job_name, job_args, source, enabled, next_due_at)
                    VALUES ($1, $2, $3, $4, $5::text::jsonb, 'spec', $6, $7)
                    ON CONFLICT (name) DO UPDATE SET
                        cron = EXCLUDED.cron, prompt = EXCLUDED.prompt,
                        job_name = EXCLUDED.job_name, job_args = EXCLUDED.job_args,
                        source = 'spec', enabled = EXCLUDED.enabled,
                        next_due_at = CASE WHEN scheduled_tasks.cron = EXCLUDED.cron
                            THEN scheduled_tasks.next_due_at ELSE EXCLUDED.next_due_at END,
                        updated_at = clock_timestamp()
                    """,
                    s.name,
                    s.cron,
                    s.prompt,
                    s.job,
                    dumps(s.job_args),
                    s.enabled,
                    self._next_due(s.cron),
                )
            await conn.execute(
                "DELETE FROM scheduled_tasks "
                "WHERE source = 'spec' AND NOT (name = ANY($1::text[]))",
                [s.name for s in schedules],
            )

    async def create(
        self,
        *,
        name: str,
        cron: str,
        prompt: str | None,
        job_name: str | None,
        job_args: dict[str, Any],
        enabled: bool,
    ) -> ScheduledTask:
        try:
            row = await self._pool.fetchrow(
                f"INSERT INTO scheduled_tasks (name, cron, prompt, job_name, job_args, source, "
                f"enabled, next_due_at) "
                f"VALUES ($1, $2, $3, $4, $5::text::jsonb, 'runtime', $6, $7) "
                f"RETURNING {COLUMNS}",
                name,
                cron,
                prompt,
                job_name,
                dumps(job_args),
                enabled,
                self._next_due(cron),
            )
        except asyncpg.UniqueViolationError:
            raise DuplicateSchedule(f"a schedule named {name!r} already exists") from None
        return ScheduledTask.from_row(row)

    async def list(self) -> list[ScheduledTask]:
        rows = await self._pool.fetch(f"SELECT {COLUMNS} FROM scheduled_tasks ORDER BY name")
        return [ScheduledTask.from_row(r) for r in rows]

    async def get(self, name: str) -> ScheduledTask | None:
        row = await self._pool.fetchrow(
            f"SELECT {COLUMNS} FROM scheduled_tasks WHERE name = $1", name
        )
        return None if row is None else ScheduledTask.from_row(row)

    async def update(
        self,
        name: str,
        *,
        cron: str | None = None,
        prompt: str | None = None,
        enabled: bool | None = None,
        job_args: dict[str, Any] | None = None,
    ) -> ScheduledTask | None:
        row = await self._pool.fetchrow(
            f"""
            UPDATE scheduled_tasks SET
                cron = COALESCE($2, cron),
                prompt = CASE WHEN prompt IS NOT NULL THEN COALESCE($3, prompt) ELSE prompt END,
                enabled = COALESCE($4, enabled),
                job_args = COALESCE($5::text::jsonb, job_args),
                next_due_at = COALESCE($6, next_due_at),
                updated_at = clock_timestamp()
            WHERE name = $1 RETURNING {COLUMNS}
            """,
            name,
            cron,
            prompt,
            enabled,
            None if job_args is None else dumps(job_args),
            self._next_due(cron) if cron else None,
        )
        return None if row is None else ScheduledTask.from_row(row)

    async def delete(self, name: str) -> bool:
        status = await self._pool.execute("DELETE FROM scheduled_tasks WHERE name = $1", name)
        return affected(status) > 0

    async def claim_due(self) -> builtins.list[ScheduledTask]:
        """Atomically move every due, enabled, not running task to `running`.

        Two concurrent ticks never claim the same task: rows are locked with
        SKIP LOCKED and the status check is repeated under the lock.
        """
        rows = await self._pool.fetch(
            f"""
            UPDATE scheduled_tasks SET status = 'running', last_run_at = now(),
                updated_at = clock_timestamp()
            WHERE id IN (
                SELECT id FROM scheduled_tasks
                WHERE enabled AND status <> 'running' AND next_due_at <= now()
                ORDER BY next_due_at FOR UPDATE SKIP LOCKED
            ) AND status <> 'running'
            RETURNING {COLUMNS}
            """
        )
        tasks = (ScheduledTask.from_row(r) for r in rows)
        return sorted(tasks, key=lambda t: (t.next_due_at, t.name))

    async def finish(
        self,
        task_id: uuid.UUID,
        *,
        ok: bool,
        error: str | None,
        session_id: uuid.UUID | None,
    ) -> ScheduledTask | None:
        """`completed` or `error`, and `next_due_at` advanced past now."""
        cron = await self._pool.fetchval("SELECT cron FROM scheduled_tasks WHERE id = $1", task_id)
        if cron is None:  # deleted while it ran
            return None
        row = await self._pool.fetchrow(
            f"UPDATE scheduled_tasks SET status = $2, last_error = $3, "
            f"last_session_id = COALESCE($4, last_session_id), next_due_at = $5, "
            f"updated_at = clock_timestamp() WHERE id = $1 RETURNING {COLUMNS}",
            task_id,
            "completed" if ok else "error",
            error,
            session_id,
            self._next_due(cron),
        )
        return None if row is None else ScheduledTask.from_row(row)
