"""The session log of one butler (table `sessions`): reads here, writes by the spawner."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from butlers.db.pool import dumps

SESSION_COLUMNS = (
    "session_id, butler_name, trigger_source, prompt, model, status, created_at, "
    "completed_at, duration_ms, tool_calls, output, input_tokens, output_tokens, "
    "cost_usd, trace_id, error, context"
)
SUMMARY_COLUMNS = (
    "session_id, butler_name, trigger_source, model, status, created_at, completed_at, "
    "duration_ms, input_tokens, output_tokens, cost_usd, trace_id, error"
)


class SessionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        status: str | None = None,
        trigger_source: str | None = None,
    ) -> list[dict[str, Any]]:
        """Newest first; optional filters on status and trigger source."""
        rows = await self._pool.fetch(
            f"SELECT {SUMMARY_COLUMNS} FROM sessions "
            "WHERE ($1::text IS NULL OR status = $1) "
            "AND ($2::text IS NULL OR trigger_source = $2) "
            "ORDER BY created_at DESC, session_id LIMIT $3 OFFSET $4",
            status,
            trigger_source,
            limit,
            offset,
        )
        return [dict(row) for row in rows]

    async def get(self, session_id: uuid.UUID) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = $1", session_id
        )
        return None if row is None else dict(row)

    async def create(
        self,
        session_id: uuid.UUID,
        *,
        butler_name: str,
        trigger_source: str,
        prompt: str,
        model: str | None,
        trace_id: str | None,
        context: Any = None,
    ) -> None:
        """First of the two writes of a session: the `running` row."""
        await self._pool.execute(
            "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, model, "
            "status, trace_id, context) "
            "VALUES ($1, $2, $3, $4, $5, 'running', $6, $7::text::jsonb)",
            session_id,
            butler_name,
            trigger_source,
            prompt,
            model,
            trace_id,
            None if context is None else dumps(context),
        )

    async def complete(
        self,
        session_id: uuid.UUID,
        *,
        status: str,
        duration_ms: int,
        tool_calls: Sequence[Any],
        output: str | None,
        input_tokens: int | None,
        output_tokens: int | None,
        error: str | None,
        cost_usd: float | None = None,
    ) -> None:
        """Second write: the final status and everything the session produced."""
        await self._pool.execute(
            "UPDATE sessions SET status = $2, completed_at = clock_timestamp(), duration_ms = $3, "
            "tool_calls = $4::text::jsonb, output = $5, input_tokens = $6, output_tokens = $7, "
            "error = $8, cost_usd = $9 WHERE session_id = $1",
            session_id,
            status,
            duration_ms,
            dumps(tool_calls),
            output,
            input_tokens,
            output_tokens,
            error,
            cost_usd,
        )
