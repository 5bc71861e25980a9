"""The `deliveries` table (every send attempt of every tool and its outcome: `sent`,
`failed`, `held` for the owner's approval, `refused`; a reply is `sending` while one
process sends it) and `allowed_contacts` (recipients the owner allowed besides their own
destinations)."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from butlers.db.pool import dumps
from butlers.modules.view import Clause, Listing, Reader
from butlers.stores.records import Record, expression


@dataclass(frozen=True, slots=True)
class Delivered(Record):
    """A delivery as `notify` reports it (the body left out)."""

    id: uuid.UUID
    channel: str
    recipient: str | None
    subject: str | None
    status: str  # sending | sent | failed | held | refused
    error: str | None
    provider_message_id: str | None
    tool: str | None
    approval_id: uuid.UUID | None
    created_at: datetime
    request_id: uuid.UUID | None = None
    attempts: int = 1
    interrupted: int = 0  # attempts a crash cut off mid-send (then sent again)


@dataclass(frozen=True, slots=True)
class Delivery(Record):
    id: uuid.UUID
    channel: str
    recipient: str | None
    subject: str | None
    body: str
    status: str
    error: str | None
    provider_message_id: str | None
    tool: str | None
    approval_id: uuid.UUID | None
    created_at: datetime
    request_id: uuid.UUID | None
    attempts: int
    interrupted: int


@dataclass(frozen=True, slots=True)
class DeliveryShown(Record):
    """A delivery as the dashboard lists it (the body's first 500 characters)."""

    id: uuid.UUID
    channel: str
    recipient: str | None
    subject: str | None
    body: str = field(metadata=expression("left(body, 500)"))
    status: str
    error: str | None
    provider_message_id: str | None
    tool: str | None
    created_at: datetime
    request_id: uuid.UUID | None
    attempts: int
    interrupted: int


@dataclass(frozen=True, slots=True)
class AllowedContact(Record):
    """A recipient the owner allowed: sends to it go out without an approval."""

    channel: str
    address: str
    name: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DeliveryCount(Record):
    """Deliveries of one channel and status: all, and those since a time."""

    channel: str
    status: str
    n: int = field(metadata=expression("count(*)"))
    recent: int = field(metadata=expression("count(*) FILTER (WHERE created_at >= $1)"))


@dataclass(frozen=True, slots=True)
class Failure(Record):
    created_at: datetime
    error: str | None


# The dashboard's read: newest first.
DELIVERIES = Listing(
    "deliveries",
    DeliveryShown,
    order_key="created_at",
    order_sql="created_at DESC, id DESC",
    clauses={
        "channel": Clause("channel = {}"),
        "status": Clause("status = {}"),
        "since": Clause("created_at >= {}"),
    },
)


async def delivery_counts(db: Reader, since: datetime) -> list[DeliveryCount]:
    rows = await db.fetch(
        f"SELECT {DeliveryCount.columns()} FROM deliveries GROUP BY channel, status", since
    )
    return [DeliveryCount.from_row(r) for r in rows]


async def last_failure(db: Reader) -> Failure | None:
    rows = await db.fetch(
        f"SELECT {Failure.columns()} FROM deliveries WHERE status = 'failed' "
        "ORDER BY created_at DESC LIMIT 1"
    )
    return Failure.from_row(rows[0]) if rows else None


# The timeline's events of this table: (at, kind, ref, summary, status) rows.
TIMELINE = ("SELECT created_at, 'delivery', id::text, channel, status FROM deliveries",)


class MessengerStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record(
        self,
        channel: str,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        status: str,
        error: str | None,
        provider_message_id: str | None = None,
        tool: str | None = None,
        request_id: uuid.UUID | None = None,
        thread: dict[str, Any] | None = None,
    ) -> Delivered:
        """One attempt's row. A reply to a switchboard message (`request_id`) has one
        row, claimed by `claim_reply` (which counts the attempt) and updated here."""
        row = await self._pool.fetchrow(
            "INSERT INTO deliveries (channel, recipient, subject, body, status, error, "
            "provider_message_id, tool, request_id, thread) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text::jsonb) "
            "ON CONFLICT (request_id) WHERE request_id IS NOT NULL DO UPDATE SET "
            "recipient = EXCLUDED.recipient, status = EXCLUDED.status, "
            "error = EXCLUDED.error, body = EXCLUDED.body, tool = EXCLUDED.tool, "
            "provider_message_id = EXCLUDED.provider_message_id, approval_id = NULL, "
            "created_at = clock_timestamp() "
            f"RETURNING {Delivered.columns()}",
            channel,
            recipient,
            subject,
            body,
            status,
            error,
            provider_message_id,
            tool,
            request_id,
            None if thread is None else dumps(thread),
        )
        return Delivered.from_row(row)

    async def settle(
        self,
        delivery_id: uuid.UUID,
        *,
        status: str,
        error: str | None,
        approval_id: uuid.UUID | None,
        provider_message_id: str | None = None,
    ) -> Delivered:
        """The outcome of a held delivery: sent or failed once approved, else refused."""
        row = await self._pool.fetchrow(
            "UPDATE deliveries SET status = $2, error = $3, approval_id = $4, "
            "provider_message_id = $5, updated_at = clock_timestamp() "
            f"WHERE id = $1 RETURNING {Delivered.columns()}",
            delivery_id,
            status,
            error,
            approval_id,
            provider_message_id,
        )
        return Delivered.from_row(row)

    async def is_allowed(self, channel: str, address: str) -> bool:
        return bool(
            await self._pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM allowed_contacts "
                "WHERE channel = $1 AND address = $2)",
                channel,
                address,
            )
        )

    async def allow(self, channel: str, address: str, name: str | None) -> AllowedContact:
        row = await self._pool.fetchrow(
            "INSERT INTO allowed_contacts (channel, address, name) VALUES ($1, $2, $3) "
            "ON CONFLICT (channel, address) DO UPDATE SET name = EXCLUDED.name "
            f"RETURNING {AllowedContact.columns()}",
            channel,
            address,
            name,
        )
        return AllowedContact.from_row(row)

    async def disallow(self, channel: str, address: str) -> bool:
        status = await self._pool.execute(
            "DELETE FROM allowed_contacts WHERE channel = $1 AND address = $2", channel, address
        )
        return bool(status == "DELETE 1")

    async def allowed(self, limit: int) -> list[AllowedContact]:
        rows = await self._pool.fetch(
            f"SELECT {AllowedContact.columns()} FROM allowed_contacts "
            "ORDER BY channel, address LIMIT $1",
            limit,
        )
        return [AllowedContact.from_row(r) for r in rows]

    async def claim_reply(
        self,
        request_id: uuid.UUID,
        channel: str,
        body: str,
        thread: dict[str, Any],
        *,
        run: int,
        stale_after: float,
    ) -> Delivered | None:
        """Mark the reply of `request_id` `sending` by butler start `run`, or None when
        it may not be sent now: it was sent, held or refused, or another attempt is
        sending it. A row left `sending` by an earlier start (that process died mid-send)
        or for longer than `stale_after` seconds is claimed again and counted in
        `interrupted`. The claim counts as an attempt."""
        row = await self._pool.fetchrow(
            "INSERT INTO deliveries (channel, body, status, tool, request_id, thread, "
            "claimed_by, claimed_at) "
            "VALUES ($1, $2, 'sending', 'reply', $3, $4::text::jsonb, $5, clock_timestamp()) "
            "ON CONFLICT (request_id) WHERE request_id IS NOT NULL DO UPDATE SET "
            "status = 'sending', error = NULL, body = EXCLUDED.body, "
            "claimed_by = EXCLUDED.claimed_by, claimed_at = EXCLUDED.claimed_at, "
            "attempts = deliveries.attempts + 1, "
            "interrupted = deliveries.interrupted + (deliveries.status = 'sending')::int "
            "WHERE deliveries.status = 'failed' OR (deliveries.status = 'sending' AND ("
            "deliveries.claimed_by < EXCLUDED.claimed_by OR deliveries.claimed_at < "
            "clock_timestamp() - make_interval(secs => $6))) "
            f"RETURNING {Delivered.columns()}",
            channel,
            body,
            request_id,
            dumps(thread),
            run,
            stale_after,
        )
        return None if row is None else Delivered.from_row(row)

    async def reply_row(self, request_id: uuid.UUID) -> Delivered | None:
        """The reply already recorded for a switchboard message, if any."""
        row = await self._pool.fetchrow(
            f"SELECT {Delivered.columns()} FROM deliveries WHERE request_id = $1", request_id
        )
        return None if row is None else Delivered.from_row(row)

    async def deliveries(
        self, channel: str | None, status: str | None, limit: int
    ) -> list[Delivery]:
        rows = await self._pool.fetch(
            f"SELECT {Delivery.columns()} FROM deliveries "
            "WHERE ($1::text IS NULL OR channel = $1) AND ($2::text IS NULL OR status = $2) "
            "ORDER BY created_at DESC LIMIT $3",
            channel,
            status,
            limit,
        )
        return [Delivery.from_row(r) for r in rows]
