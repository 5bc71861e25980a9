"""SQL of the switchboard tables."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

import asyncpg

from butlers.db.pool import dumps
from butlers.db.sql import affected
from butlers.switchboard.dispatch import RouteOutcome
from butlers.switchboard.envelope import IngestEnvelopeV1


class SwitchboardStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    # -- inbox -------------------------------------------------------------------

    async def accept(
        self, envelope: IngestEnvelopeV1, trace_id: str | None
    ) -> tuple[uuid.UUID, bool]:
        """(request_id, duplicate): a key seen before returns its first request_id."""
        request_id = uuid.uuid4()
        inserted = await self._pool.fetchval(
            """
            INSERT INTO message_inbox
                (request_id, idempotency_key, channel, provider, sender, text, envelope, trace_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8)
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING request_id
            """,
            request_id,
            envelope.idempotency_key,
            envelope.source.channel,
            envelope.source.provider,
            envelope.sender.identity,
            envelope.payload.text,
            envelope.model_dump_json(),
            trace_id,
        )
        if inserted is not None:
            return inserted, False
        existing = await self._pool.fetchval(
            "SELECT request_id FROM message_inbox WHERE idempotency_key = $1",
            envelope.idempotency_key,
        )
        return existing, True

    async def classified(self, request_id: uuid.UUID, classification: dict[str, Any]) -> None:
        await self._pool.execute(
            "UPDATE message_inbox SET status = 'classified', classification = $2::text::jsonb "
            "WHERE request_id = $1",
            request_id,
            dumps(classification),
        )

    async def finished(self, request_id: uuid.UUID, status: str) -> None:
        mapped = {"completed": "dispatched"}.get(status, status)
        await self._pool.execute(
            "UPDATE message_inbox SET status = $2, completed_at = clock_timestamp() "
            "WHERE request_id = $1",
            request_id,
            mapped,
        )

    async def message(self, request_id: uuid.UUID) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            "SELECT request_id, idempotency_key, channel, provider, sender, text, status, "
            "classification, trace_id, received_at, completed_at "
            "FROM message_inbox WHERE request_id = $1",
            request_id,
        )
        return None if row is None else dict(row)

    # -- routing ---------------------------------------------------------------------

    async def log_route(
        self, request_id: uuid.UUID | None, outcome: RouteOutcome, trace_id: str | None
    ) -> None:
        session_id = outcome.session_id
        await self._pool.execute(
            """
            INSERT INTO routing_log (route_id, request_id, butler, prompt, segment, status,
                                     session_id, error, duration_ms, trace_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
            """,
            outcome.route_id,
            request_id,
            outcome.entry.butler,
            outcome.entry.prompt,
            outcome.entry.segment,
            outcome.status,
            uuid.UUID(session_id) if session_id else None,
            outcome.error,
            outcome.duration_ms,
            trace_id,
        )

    async def log_fanout(
        self,
        request_id: uuid.UUID,
        outcomes: list[RouteOutcome],
        status: str,
        duration_ms: int,
    ) -> None:
        plan = [asdict(o.entry) for o in outcomes]
        failures = [
            {"butler": o.entry.butler, "status": o.status, "error": o.error}
            for o in outcomes
            if o.status != "success"
        ]
        await self._pool.execute(
            """
            INSERT INTO fanout_execution_log (request_id, abort_policy, plan, status,
                target_count, success_count, failures, duration_ms)
            VALUES ($1, 'continue', $2::text::jsonb, $3, $4, $5, $6::text::jsonb, $7)
            """,
            request_id,
            dumps(plan),
            status,
            len(outcomes),
            sum(o.status == "success" for o in outcomes),
            dumps(failures),
            duration_ms,
        )

    async def routes(self, request_id: uuid.UUID | None, limit: int) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            "SELECT route_id, request_id, butler, prompt, segment, status, session_id, error, "
            "duration_ms, trace_id, created_at FROM routing_log "
            "WHERE ($1::uuid IS NULL OR request_id = $1) ORDER BY created_at DESC LIMIT $2",
            request_id,
            limit,
        )
        return [dict(r) for r in rows]

    # -- registry ----------------------------------------------------------------------

    async def register(
        self, name: str, description: str, url: str, hints: list[str], modules: list[str]
    ) -> None:
        await self._pool.execute(
            """
            INSERT INTO butler_registry (name, description, url, hints, modules)
            VALUES ($1, $2, $3, $4::text::jsonb, $5::text::jsonb)
            ON CONFLICT (name) DO UPDATE SET
                description = EXCLUDED.description, url = EXCLUDED.url,
                hints = EXCLUDED.hints, modules = EXCLUDED.modules,
                registered_at = clock_timestamp(), last_seen_at = clock_timestamp()
            """,
            name,
            description,
            url,
            dumps(hints),
            dumps(modules),
        )

    async def heartbeat(self, name: str) -> bool:
        status = await self._pool.execute(
            "UPDATE butler_registry SET last_seen_at = clock_timestamp() WHERE name = $1", name
        )
        return affected(status) > 0

    async def registry(self, stale_after_seconds: float) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            """
            SELECT name, description, url, hints, modules, registered_at, last_seen_at,
                   last_seen_at > clock_timestamp() - make_interval(secs => $1) AS alive
            FROM butler_registry ORDER BY name
            """,
            stale_after_seconds,
        )
        return [dict(r) for r in rows]
