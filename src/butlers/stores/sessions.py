"""The session log of one butler (tables `sessions` and `llm_calls`): reads here,
writes by the spawner."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, get_args

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.stores.records import Record

SessionStatus = Literal["running", "completed", "error", "interrupted", "cancelled"]
"""Every status a session row can have: the one vocabulary of the tools, the dashboard's
API (its enum, from which the web UI's list is typed) and the table's CHECK."""
SESSION_STATUSES: tuple[str, ...] = get_args(SessionStatus)


@dataclass(frozen=True, slots=True)
class SessionSummary(Record):
    """A session without its prompt, output and tool calls (what `sessions_list` shows)."""

    session_id: uuid.UUID
    butler_name: str
    trigger_source: str
    model: str | None
    status: str
    created_at: datetime
    completed_at: datetime | None
    duration_ms: int | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: Decimal | None
    trace_id: str | None
    error: str | None
    llm_call_count: int | None


@dataclass(frozen=True, slots=True)
class Session(Record):
    session_id: uuid.UUID
    butler_name: str
    trigger_source: str
    prompt: str
    model: str | None
    status: str
    created_at: datetime
    completed_at: datetime | None
    duration_ms: int | None
    tool_calls: JsonValue
    output: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: Decimal | None
    trace_id: str | None
    error: str | None
    context: JsonValue
    llm_call_count: int | None


@dataclass(frozen=True, slots=True)
class LlmCall(Record):
    """One model call of a session: what was sent since the previous call, what came
    back, its tokens and timing (request and response redacted and bounded)."""

    session_id: uuid.UUID
    seq: int
    model: str | None
    started_at: datetime
    duration_ms: float
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    request: JsonValue
    response: JsonValue
    error: str | None


LLM_CALL_COLUMNS = LlmCall.columns()


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
    ) -> list[SessionSummary]:
        """Newest first; optional filters on status and trigger source."""
        rows = await self._pool.fetch(
            f"SELECT {SessionSummary.columns()} FROM sessions "
            "WHERE ($1::text IS NULL OR status = $1) "
            "AND ($2::text IS NULL OR trigger_source = $2) "
            "ORDER BY created_at DESC, session_id LIMIT $3 OFFSET $4",
            status,
            trigger_source,
            limit,
            offset,
        )
        return [SessionSummary.from_row(row) for row in rows]

    async def get(self, session_id: uuid.UUID) -> Session | None:
        row = await self._pool.fetchrow(
            f"SELECT {Session.columns()} FROM sessions WHERE session_id = $1", session_id
        )
        return None if row is None else Session.from_row(row)

    async def llm_calls(self, session_id: uuid.UUID) -> builtins.list[LlmCall]:
        """The model calls of a session, in order (bounded by the turn limit)."""
        rows = await self._pool.fetch(
            f"SELECT {LLM_CALL_COLUMNS} FROM llm_calls WHERE session_id = $1 ORDER BY seq",
            session_id,
        )
        return [LlmCall.from_row(row) for row in rows]

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
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> bool:
        """First of the two writes of a session: the `running` row.

        False (nothing written) when a session with this idempotency key exists.
        """
        status = await self._pool.execute(
            "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, model, "
            "status, trace_id, context, idempotency_key, request_hash) "
            "VALUES ($1, $2, $3, $4, $5, 'running', $6, $7::text::jsonb, $8, $9) "
            "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
            session_id,
            butler_name,
            trigger_source,
            prompt,
            model,
            trace_id,
            None if context is None else dumps(context),
            idempotency_key,
            request_hash,
        )
        return bool(status != "INSERT 0 0")

    async def by_idempotency_key(self, key: str) -> dict[str, Any] | None:
        """The session a keyed trigger ran, with its request hash."""
        row = await self._pool.fetchrow(
            f"SELECT {Session.columns()}, request_hash FROM sessions WHERE idempotency_key = $1",
            key,
        )
        return None if row is None else dict(row)

    async def interrupt_running(self, reason: str, keep: Sequence[uuid.UUID] = ()) -> int:
        """Mark every `running` session except `keep` as `interrupted` (their process is
        gone); returns how many were marked."""
        status = await self._pool.execute(
            "UPDATE sessions SET status = 'interrupted', completed_at = clock_timestamp(), "
            # Clamped: a row left running for weeks must not fail the whole sweep.
            "duration_ms = LEAST(2147483647, GREATEST(0, "
            "extract(epoch FROM clock_timestamp() - created_at) * 1000))::int, error = $1 "
            "WHERE status = 'running' AND NOT (session_id = ANY($2::uuid[]))",
            reason,
            list(keep),
        )
        return int(status.split()[-1])

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
        llm_calls: Sequence[dict[str, Any]] = (),
        cached_tokens: int | None = None,
        cache_write_tokens: int | None = None,
    ) -> None:
        """Second write: the final status and everything the session produced, its
        model calls (`llm_calls` rows, keys as `LlmCall`'s fields) in the same transaction."""
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "UPDATE sessions SET status = $2, completed_at = clock_timestamp(), "
                "duration_ms = $3, tool_calls = $4::text::jsonb, output = $5, "
                "input_tokens = $6, output_tokens = $7, error = $8, cost_usd = $9, "
                "llm_call_count = $10, cached_tokens = $11, cache_write_tokens = $12 "
                "WHERE session_id = $1",
                session_id,
                status,
                duration_ms,
                dumps(tool_calls),
                output,
                input_tokens,
                output_tokens,
                error,
                cost_usd,
                len(llm_calls),
                cached_tokens,
                cache_write_tokens,
            )
            if llm_calls:
                await connection.executemany(
                    "INSERT INTO llm_calls (session_id, seq, model, started_at, duration_ms, "
                    "input_tokens, output_tokens, cached_tokens, cache_write_tokens, "
                    "request, response, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
                    "$10::text::jsonb, $11::text::jsonb, $12) "
                    "ON CONFLICT (session_id, seq) DO NOTHING",
                    [
                        (
                            session_id,
                            seq,
                            call.get("model"),
                            call["started_at"],
                            call["duration_ms"],
                            call.get("input_tokens"),
                            call.get("output_tokens"),
                            call.get("cached_tokens"),
                            call.get("cache_write_tokens"),
                            dumps(call.get("request")),
                            dumps(call.get("response")),
                            call.get("error"),
                        )
                        for seq, call in enumerate(llm_calls)
                    ],
                )
