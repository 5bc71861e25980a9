"""The switchboard's writes and the butler's reads of its inbox, routing log and
registry (the records and the dashboard's reads are in `store.py`).

The inbox is a state machine, each transition one statement or one transaction:
`accepted` (inserted) → `classified` (the plan, with a route id per target) → one
`routing_log` row per route as it finishes → `dispatched` | `partial` | `failed`
together with the `fanout_execution_log` row. A message the recovery sweep gives
up on is `failed` with an `error`. A stranger's message is `quarantined` (with its
reason) until the owner releases it (→ `accepted`) or drops it (→ `dropped`). A closed
message with a thread to answer on has `reply_state` `pending` until its reply was
delivered (`sent`) or given up on (`failed`); a message written in the dashboard is
answered there, its reply `sent` as soon as it is stored.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

import asyncpg

from butlers.db.pool import dumps
from butlers.db.sql import affected
from butlers.modules.switchboard.store import (
    OPEN_STATUSES,
    Claimed,
    Message,
    PendingReply,
    Registration,
    RouteLogged,
)
from butlers.switchboard.classification import RouteEntry
from butlers.switchboard.dispatch import RouteOutcome, TriggerAnswer, inbox_status
from butlers.switchboard.envelope import IngestEnvelopeV1

# Set on closing a message: one that came with a thread to answer on
# (`payload.raw.reply`) has its reply pending; the dashboard's is answered on its page.
REPLY_PENDING = (
    "reply_state = CASE WHEN channel = 'dashboard' THEN 'sent' "
    "WHEN jsonb_typeof(envelope->'payload'->'raw'->'reply') = 'object' "
    "THEN 'pending' END, reply_text = {}"
)


class IdempotencyConflict(Exception):
    """An idempotency key this caller used before came back with different content."""


class SwitchboardStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    # -- inbox -------------------------------------------------------------------

    async def accept(
        self,
        envelope: IngestEnvelopeV1,
        trace_id: str | None,
        request_id: uuid.UUID,
        submitted_by: str,
        quarantine_reason: str | None = None,
    ) -> tuple[uuid.UUID, bool]:
        """(request_id, duplicate): a key this caller used before returns its first
        request_id; with different content it is an `IdempotencyConflict`. With a
        `quarantine_reason` the message is stored `quarantined` and starts nothing."""
        digest = envelope.content_digest()
        inserted = await self._pool.fetchval(
            """
            INSERT INTO message_inbox
                (request_id, idempotency_key, channel, provider, sender, text, envelope,
                 trace_id, submitted_by, content_sha256, status, quarantine_reason)
            VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8, $9, $10,
                    CASE WHEN $11::text IS NULL THEN 'accepted' ELSE 'quarantined' END, $11)
            ON CONFLICT (submitted_by, idempotency_key) DO NOTHING
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
            submitted_by,
            digest,
            quarantine_reason,
        )
        if inserted is not None:
            return inserted, False
        existing = await self._pool.fetchrow(
            "SELECT request_id, content_sha256 FROM message_inbox "
            "WHERE submitted_by = $1 AND idempotency_key = $2",
            submitted_by,
            envelope.idempotency_key,
        )
        if existing["content_sha256"] not in (None, digest):
            raise IdempotencyConflict(
                f"idempotency key {envelope.idempotency_key!r} conflicts with message "
                f"{existing['request_id']}, accepted earlier with different content; "
                "nothing was accepted (use a new key for a new message)"
            )
        return existing["request_id"], True

    async def classified(self, request_id: uuid.UUID, classification: dict[str, Any]) -> bool:
        """accepted → classified, with the plan; False when it was not `accepted`."""
        status = await self._pool.execute(
            "UPDATE message_inbox SET status = 'classified', classification = $2::text::jsonb, "
            "updated_at = clock_timestamp() WHERE request_id = $1 AND status = 'accepted'",
            request_id,
            dumps(classification),
        )
        return bool(status != "UPDATE 0")

    async def ignored(self, request_id: uuid.UUID, classification: dict[str, Any]) -> bool:
        """accepted → ignored (a triage rule's decision, kept as the classification)."""
        status = await self._pool.execute(
            "UPDATE message_inbox SET status = 'ignored', classification = $2::text::jsonb, "
            "completed_at = clock_timestamp(), updated_at = clock_timestamp() "
            "WHERE request_id = $1 AND status = 'accepted'",
            request_id,
            dumps(classification),
        )
        return bool(status != "UPDATE 0")

    async def finish(
        self,
        request_id: uuid.UUID,
        outcomes: list[RouteOutcome],
        status: str,
        duration_ms: int,
        reply_text: str | None = None,
    ) -> tuple[bool, PendingReply | None]:
        """classified → dispatched | partial | failed, with the fan-out log row, in one
        transaction; False (nothing written) when the message was no longer open. A
        message with a thread gets its reply (`reply_text`) pending, returned (what
        `pending_reply` would read next)."""
        mapped = inbox_status(status)
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "UPDATE message_inbox SET status = $2, completed_at = clock_timestamp(), "
                f"updated_at = clock_timestamp(), {REPLY_PENDING.format('$3')} "
                "WHERE request_id = $1 AND status = 'classified' "
                f"RETURNING reply_state, {PendingReply.columns()}",
                request_id,
                mapped,
                reply_text,
            )
            if row is None:
                return False, None
            await self._log_fanout(conn, request_id, outcomes, status, duration_ms)
        return True, PendingReply.from_row(row) if row["reply_state"] == "pending" else None

    async def give_up(
        self, request_id: uuid.UUID, reason: str, reply_text: str | None = None
    ) -> bool:
        """An open message → `failed`, with the reason (and the owner's reply pending)."""
        status = await self._pool.execute(
            "UPDATE message_inbox SET status = 'failed', error = $2, "
            "completed_at = clock_timestamp(), updated_at = clock_timestamp(), "
            f"{REPLY_PENDING.format('$4')} "
            "WHERE request_id = $1 AND status = ANY($3::text[])",
            request_id,
            reason,
            list(OPEN_STATUSES),
            reply_text,
        )
        return bool(status != "UPDATE 0")

    async def open_messages(self, exclude: list[uuid.UUID], limit: int) -> list[uuid.UUID]:
        """Messages not yet finished that no live task is processing, oldest first."""
        rows = await self._pool.fetch(
            "SELECT request_id FROM message_inbox WHERE status = ANY($1::text[]) "
            "AND NOT (request_id = ANY($2::uuid[])) ORDER BY received_at LIMIT $3",
            list(OPEN_STATUSES),
            exclude,
            limit,
        )
        return [row["request_id"] for row in rows]

    async def claim(self, request_id: uuid.UUID) -> Claimed | None:
        """Count one more processing attempt of an open message; None when it is closed."""
        row = await self._pool.fetchrow(
            "UPDATE message_inbox SET attempts = attempts + 1, updated_at = clock_timestamp() "
            "WHERE request_id = $1 AND status = ANY($2::text[]) "
            "RETURNING request_id, status, text, classification, attempts, "
            "extract(epoch FROM clock_timestamp() - received_at) AS age_seconds, envelope, "
            "envelope->'payload'->'raw'->'quoted' AS quoted, trace_id",
            request_id,
            list(OPEN_STATUSES),
        )
        return None if row is None else Claimed.from_row(row)

    async def route_outcomes(self, request_id: uuid.UUID) -> dict[uuid.UUID, RouteOutcome]:
        """The routes of a message that already have an outcome, by route id."""
        rows = await self._pool.fetch(
            "SELECT route_id, butler, prompt, segment, status, session_id, error, duration_ms "
            "FROM routing_log WHERE request_id = $1",
            request_id,
        )
        return {
            row["route_id"]: RouteOutcome(
                entry=RouteEntry(row["butler"], row["prompt"], row["segment"] or row["prompt"]),
                status=row["status"],
                duration_ms=row["duration_ms"],
                answer=TriggerAnswer(
                    success=row["status"] == "success", session_id=str(row["session_id"])
                )
                if row["session_id"]
                else None,
                error=row["error"],
                route_id=row["route_id"],
            )
            for row in rows
        }

    # -- quarantine ------------------------------------------------------------------

    async def release(self, request_id: uuid.UUID) -> Claimed | None:
        """quarantined → accepted (the owner let it in); None when not quarantined."""
        row = await self._pool.fetchrow(
            "UPDATE message_inbox SET status = 'accepted', updated_at = clock_timestamp() "
            "WHERE request_id = $1 AND status = 'quarantined' "
            "RETURNING request_id, status, text, classification, attempts, "
            "0.0 AS age_seconds, envelope, envelope->'payload'->'raw'->'quoted' AS quoted, "
            "trace_id",
            request_id,
        )
        return None if row is None else Claimed.from_row(row)

    async def drop(self, request_id: uuid.UUID) -> bool:
        """quarantined → dropped (kept for the record, never processed)."""
        status = await self._pool.execute(
            "UPDATE message_inbox SET status = 'dropped', completed_at = clock_timestamp(), "
            "updated_at = clock_timestamp() WHERE request_id = $1 AND status = 'quarantined'",
            request_id,
        )
        return affected(status) > 0

    async def quarantined(self, limit: int) -> list[Message]:
        rows = await self._pool.fetch(
            f"SELECT {Message.columns()} FROM message_inbox WHERE status = 'quarantined' "
            "ORDER BY received_at DESC LIMIT $1",
            limit,
        )
        return [Message.from_row(r) for r in rows]

    # -- replies ---------------------------------------------------------------------

    async def pending_reply(self, request_id: uuid.UUID) -> PendingReply | None:
        row = await self._pool.fetchrow(
            f"SELECT {PendingReply.columns()} FROM message_inbox "
            "WHERE request_id = $1 AND reply_state = 'pending'",
            request_id,
        )
        return None if row is None else PendingReply.from_row(row)

    async def pending_replies(self, exclude: list[uuid.UUID], limit: int) -> list[uuid.UUID]:
        rows = await self._pool.fetch(
            "SELECT request_id FROM message_inbox WHERE reply_state = 'pending' "
            "AND NOT (request_id = ANY($1::uuid[])) ORDER BY received_at LIMIT $2",
            exclude,
            limit,
        )
        return [row["request_id"] for row in rows]

    async def replied(
        self,
        request_id: uuid.UUID,
        state: str,
        error: str | None,
        delivery_id: uuid.UUID | None,
    ) -> None:
        """One reply attempt's outcome: `sent`, `failed` (given up) or still `pending`."""
        await self._pool.execute(
            "UPDATE message_inbox SET reply_state = $2, reply_error = $3, "
            "reply_delivery_id = coalesce($4, reply_delivery_id), "
            "reply_attempts = reply_attempts + 1, updated_at = clock_timestamp() "
            "WHERE request_id = $1 AND reply_state = 'pending'",
            request_id,
            state,
            error,
            delivery_id,
        )

    async def message(self, request_id: uuid.UUID) -> Message | None:
        row = await self._pool.fetchrow(
            f"SELECT {Message.columns()} FROM message_inbox WHERE request_id = $1", request_id
        )
        return None if row is None else Message.from_row(row)

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
            ON CONFLICT (route_id) DO NOTHING
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

    @staticmethod
    async def _log_fanout(
        conn: asyncpg.Connection,
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
        await conn.execute(
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

    async def routes(self, request_id: uuid.UUID | None, limit: int) -> list[RouteLogged]:
        rows = await self._pool.fetch(
            f"SELECT {RouteLogged.columns()} FROM routing_log "
            "WHERE ($1::uuid IS NULL OR request_id = $1) ORDER BY created_at DESC LIMIT $2",
            request_id,
            limit,
        )
        return [RouteLogged.from_row(r) for r in rows]

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

    async def deregister(self, name: str) -> bool:
        status = await self._pool.execute("DELETE FROM butler_registry WHERE name = $1", name)
        return bool(status != "DELETE 0")

    async def expire_registrations(self, older_than_seconds: float) -> list[str]:
        """Remove entries whose last heartbeat is older than that; their names."""
        rows = await self._pool.fetch(
            "DELETE FROM butler_registry "
            "WHERE last_seen_at < clock_timestamp() - make_interval(secs => $1) RETURNING name",
            older_than_seconds,
        )
        return [row["name"] for row in rows]

    async def heartbeat(self, name: str) -> bool:
        status = await self._pool.execute(
            "UPDATE butler_registry SET last_seen_at = clock_timestamp() WHERE name = $1", name
        )
        return affected(status) > 0

    async def registry(self, stale_after_seconds: float) -> list[Registration]:
        rows = await self._pool.fetch(
            """
            SELECT name, description, url, hints, modules, registered_at, last_seen_at,
                   last_seen_at > clock_timestamp() - make_interval(secs => $1) AS alive
            FROM butler_registry ORDER BY name
            """,
            stale_after_seconds,
        )
        return [Registration.from_row(r) for r in rows]

    async def live_url_of_module(self, module: str, stale_after_seconds: float) -> str | None:
        """The URL of the first butler (by name) running `module` whose heartbeat is not
        older than `stale_after_seconds`, or None: one row, not the whole registry."""
        value = await self._pool.fetchval(
            "SELECT url FROM butler_registry WHERE modules ? $1 "
            "AND last_seen_at > clock_timestamp() - make_interval(secs => $2) "
            "ORDER BY name LIMIT 1",
            module,
            stale_after_seconds,
        )
        return None if value is None else str(value)

    async def url_of_module(self, module: str) -> tuple[str, str] | None:
        """(name, url) of the registered butler running `module` (the freshest heartbeat
        first), or None."""
        row = await self._pool.fetchrow(
            "SELECT name, url FROM butler_registry WHERE modules ? $1 "
            "ORDER BY last_seen_at DESC, name LIMIT 1",
            module,
        )
        return None if row is None else (row["name"], row["url"])
