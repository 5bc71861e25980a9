"""The `reminders` and `reminder_deliveries` tables: the one home of their SQL."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from butlers.modules.view import Clause, Listing
from butlers.stores.records import Record, expression

CLAIM_LEASE_SECONDS = 120  # an occurrence claimed by a loop that died is retried after this
CLAIM_BATCH = 20


@dataclass(frozen=True, slots=True)
class Reminder(Record):
    id: uuid.UUID
    text: str
    channel: str | None
    rrule: str | None
    time_zone: str
    first_due_at: datetime
    next_due_at: datetime | None
    attempt_at: datetime | None
    attempts: int
    status: str  # pending | delivered | failed | cancelled
    last_error: str | None
    delivered_count: int
    last_delivered_at: datetime | None
    created_by: str
    session_id: str | None
    cancelled_by: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ReminderDelivery(Record):
    id: uuid.UUID
    reminder_id: uuid.UUID
    due_at: datetime
    attempt: int
    attempted_at: datetime
    late: bool
    status: str  # sent | failed
    error: str | None
    delivery_id: str | None


@dataclass(frozen=True, slots=True)
class ReminderShown(Record):
    """A reminder as the dashboard lists it, with its latest attempt."""

    id: uuid.UUID
    text: str
    channel: str | None
    rrule: str | None
    time_zone: str
    next_due_at: datetime | None
    status: str
    last_error: str | None
    delivered_count: int
    last_delivered_at: datetime | None
    created_by: str
    cancelled_by: str | None
    created_at: datetime
    last_late: bool | None = field(
        metadata=expression(
            "(SELECT d.late FROM reminder_deliveries d WHERE d.reminder_id = reminders.id "
            "ORDER BY d.attempted_at DESC LIMIT 1)"
        )
    )


REMINDERS = Listing(
    "reminders",
    ReminderShown,
    order_key="created_at",
    order_sql="created_at DESC, id DESC",
    clauses={"status": Clause("status = {}")},
)


class TooManyReminders(Exception):
    pass


class ReminderStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(
        self,
        *,
        text: str,
        channel: str | None,
        rrule: str | None,
        time_zone: str,
        due_at: datetime,
        created_by: str,
        session_id: str | None,
        max_pending: int,
    ) -> Reminder:
        """Insert a pending reminder, refusing past `max_pending` pending ones (counted
        under a transaction-scoped lock, so concurrent calls cannot both slip past)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('butlers.reminders'))")
            pending = await conn.fetchval("SELECT count(*) FROM reminders WHERE status = 'pending'")
            if pending >= max_pending:
                raise TooManyReminders(
                    f"this butler already holds {pending} pending reminders (at most "
                    f"{max_pending}); cancel some first"
                )
            row = await conn.fetchrow(
                "INSERT INTO reminders (text, channel, rrule, time_zone, first_due_at, "
                "next_due_at, attempt_at, created_by, session_id) "
                "VALUES ($1, $2, $3, $4, $5, $5, $5, $6, $7) "
                f"RETURNING {Reminder.columns()}",
                text,
                channel,
                rrule,
                time_zone,
                due_at,
                created_by,
                session_id,
            )
        return Reminder.from_row(row)

    async def get(self, reminder_id: uuid.UUID) -> Reminder | None:
        row = await self._pool.fetchrow(
            f"SELECT {Reminder.columns()} FROM reminders WHERE id = $1", reminder_id
        )
        return None if row is None else Reminder.from_row(row)

    async def listed(self, status: str | None, limit: int) -> list[Reminder]:
        rows = await self._pool.fetch(
            f"SELECT {Reminder.columns()} FROM reminders "
            "WHERE ($1::text IS NULL OR status = $1) "
            "ORDER BY (status <> 'pending'), next_due_at, created_at DESC LIMIT $2",
            status,
            limit,
        )
        return [Reminder.from_row(r) for r in rows]

    async def with_deliveries(
        self, reminder_id: uuid.UUID, limit: int
    ) -> tuple[Reminder, list[ReminderDelivery]] | None:
        """A reminder and its attempts (newest first), read from one snapshot."""
        async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
            row = await conn.fetchrow(
                f"SELECT {Reminder.columns()} FROM reminders WHERE id = $1", reminder_id
            )
            if row is None:
                return None
            rows = await conn.fetch(
                f"SELECT {ReminderDelivery.columns()} FROM reminder_deliveries "
                "WHERE reminder_id = $1 ORDER BY attempted_at DESC LIMIT $2",
                reminder_id,
                limit,
            )
        return Reminder.from_row(row), [ReminderDelivery.from_row(r) for r in rows]

    async def cancel(self, reminder_id: uuid.UUID, by: str) -> Reminder | None:
        """Cancel a pending reminder (None when it is not pending)."""
        row = await self._pool.fetchrow(
            "UPDATE reminders SET status = 'cancelled', cancelled_by = $2, next_due_at = NULL, "
            "attempt_at = NULL, updated_at = clock_timestamp() "
            f"WHERE id = $1 AND status = 'pending' RETURNING {Reminder.columns()}",
            reminder_id,
            by,
        )
        return None if row is None else Reminder.from_row(row)

    async def due_in(self, start: datetime, end: datetime, limit: int) -> list[Reminder]:
        """Pending reminders whose next occurrence falls in [start, end)."""
        rows = await self._pool.fetch(
            f"SELECT {Reminder.columns()} FROM reminders WHERE status = 'pending' "
            "AND next_due_at >= $1 AND next_due_at < $2 ORDER BY next_due_at LIMIT $3",
            start,
            end,
            limit,
        )
        return [Reminder.from_row(r) for r in rows]

    # -- the delivery loop ---------------------------------------------------------------

    async def next_attempt_at(self) -> datetime | None:
        value: datetime | None = await self._pool.fetchval(
            "SELECT min(greatest(attempt_at, coalesce(claimed_until, attempt_at))) "
            "FROM reminders WHERE status = 'pending'"
        )
        return value

    async def claim_due(self) -> list[Reminder]:
        """Pending reminders whose attempt is due, leased to this caller for a while:
        concurrent loops never claim the same row (SKIP LOCKED), and a row whose
        claimer died is claimed again once its lease ran out."""
        rows = await self._pool.fetch(
            "UPDATE reminders SET claimed_until = clock_timestamp() + make_interval(secs => $1) "
            "WHERE id IN (SELECT id FROM reminders WHERE status = 'pending' "
            "AND attempt_at <= clock_timestamp() "
            "AND (claimed_until IS NULL OR claimed_until < clock_timestamp()) "
            "ORDER BY attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
            f"RETURNING {Reminder.columns()}",
            float(CLAIM_LEASE_SECONDS),
            CLAIM_BATCH,
        )
        return [Reminder.from_row(r) for r in rows]

    async def record_attempt(
        self,
        reminder: Reminder,
        *,
        late: bool,
        error: str | None,
        delivery_id: str | None,
        next_due_at: datetime | None,
        retry_at: datetime | None,
        give_up: bool,
    ) -> None:
        """Record one attempt on the occurrence `reminder.next_due_at` and move the
        reminder on, in one transaction: sent → the next occurrence (or delivered);
        failed → a retry at `retry_at`, or, after the last one, the next occurrence
        (or failed). A reminder cancelled meanwhile stays cancelled."""
        assert reminder.next_due_at is not None
        attempt = reminder.attempts + 1
        sent = error is None
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO reminder_deliveries (reminder_id, due_at, attempt, late, status, "
                "error, delivery_id) VALUES ($1, $2, $3, $4, $5, $6, $7) "
                "ON CONFLICT (reminder_id, due_at, attempt) DO NOTHING",
                reminder.id,
                reminder.next_due_at,
                attempt,
                late,
                "sent" if sent else "failed",
                error,
                delivery_id,
            )
            if sent or give_up:
                done = "delivered" if sent else "failed"
                status = "pending" if next_due_at is not None else done
                await conn.execute(
                    "UPDATE reminders SET status = $2, next_due_at = $3, attempt_at = $3, "
                    "claimed_until = NULL, attempts = 0, last_error = $4, "
                    "delivered_count = delivered_count + $5, "
                    "last_delivered_at = CASE WHEN $5 = 1 THEN clock_timestamp() "
                    "ELSE last_delivered_at END, updated_at = clock_timestamp() "
                    "WHERE id = $1 AND status = 'pending'",
                    reminder.id,
                    status,
                    next_due_at,
                    error,
                    1 if sent else 0,
                )
            else:
                await conn.execute(
                    "UPDATE reminders SET attempts = $2, attempt_at = $3, claimed_until = NULL, "
                    "last_error = $4, updated_at = clock_timestamp() "
                    "WHERE id = $1 AND status = 'pending'",
                    reminder.id,
                    attempt,
                    retry_at,
                    error,
                )
