"""The `deliveries` table: every notification attempt and its outcome."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from butlers.modules.view import Clause, Listing, Reader
from butlers.stores.records import Record, expression


@dataclass(frozen=True, slots=True)
class Delivered(Record):
    """A delivery as `notify` reports it (the body left out)."""

    id: uuid.UUID
    channel: str
    recipient: str | None
    subject: str | None
    status: str  # sent | failed
    error: str | None
    provider_message_id: str | None
    created_at: datetime


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
    created_at: datetime


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


class MessengerStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record(
        self,
        channel: str,
        recipient: str | None,
        subject: str | None,
        body: str,
        error: str | None,
        provider_message_id: str | None,
    ) -> Delivered:
        row = await self._pool.fetchrow(
            "INSERT INTO deliveries (channel, recipient, subject, body, status, error, "
            f"provider_message_id) VALUES ($1, $2, $3, $4, $5, $6, $7) "
            f"RETURNING {Delivered.columns()}",
            channel,
            recipient,
            subject,
            body,
            "failed" if error else "sent",
            error,
            provider_message_id,
        )
        return Delivered.from_row(row)

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
