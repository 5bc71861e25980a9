"""The `approvals` table: requests, decisions, expiry."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.db.sql import affected
from butlers.modules.view import Changes, Clause, Listing, Reader
from butlers.stores.records import Record, expression


@dataclass(frozen=True, slots=True)
class Approval(Record):
    """One request: the held call (arguments as recorded, secrets masked) and its fate."""

    id: uuid.UUID
    tool_name: str
    tool_args: JsonValue
    session_id: str | None
    status: str  # pending | approved | denied | expired
    requested_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None


COLUMNS = Approval.columns()
DECIDED = ("approved", "denied", "expired")


# The dashboard's reads --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApprovalSettled(Approval):
    """A request with the time it was settled (its decision, else its request)."""

    settled_at: datetime = field(metadata=expression("coalesce(decided_at, requested_at)"))


@dataclass(frozen=True, slots=True)
class ApprovalCount(Record):
    """Requests of one tool in one status, the oldest, and the median time to a person's
    decision."""

    tool_name: str
    status: str
    n: int = field(metadata=expression("count(*)"))
    oldest: datetime = field(metadata=expression("min(requested_at)"))
    median: float | None = field(
        metadata=expression(
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - "
            "requested_at)) FILTER (WHERE status IN ('approved', 'denied'))"
        )
    )


# Pending: oldest first (the one closest to its deadline on top).
PENDING = Listing(
    "approvals",
    Approval,
    order_key="requested_at",
    order_sql="requested_at ASC, id",
    clauses={"statuses": Clause("status = ANY({}::text[])")},
    oldest_first=True,
)
# Decided: the latest decision first.
SETTLED = Listing(
    "approvals",
    ApprovalSettled,
    order_key="settled_at",
    order_sql="coalesce(decided_at, requested_at) DESC, id DESC",
    clauses={"statuses": Clause("status = ANY({}::text[])")},
)


async def approval(db: Reader, approval_id: uuid.UUID) -> Approval | None:
    rows = await db.fetch(f"SELECT {COLUMNS} FROM approvals WHERE id = $1", approval_id)
    return Approval.from_row(rows[0]) if rows else None


async def approval_counts(db: Reader) -> list[ApprovalCount]:
    rows = await db.fetch(
        f"SELECT {ApprovalCount.columns()} FROM approvals GROUP BY tool_name, status"
    )
    return [ApprovalCount.from_row(r) for r in rows]


@dataclass(frozen=True, slots=True)
class SessionApproval(Record):
    """A request as a session's detail and its trace show it."""

    id: uuid.UUID
    tool_name: str
    session_id: str | None
    status: str
    requested_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None


async def session_approvals(db: Reader, session_ids: list[str]) -> list[SessionApproval]:
    """The requests of these sessions, oldest first."""
    rows = await db.fetch(
        f"SELECT {SessionApproval.columns()} FROM approvals "
        "WHERE session_id = ANY($1::text[]) ORDER BY requested_at",
        session_ids,
    )
    return [SessionApproval.from_row(r) for r in rows]


async def pending_count(db: Reader) -> int:
    rows = await db.fetch("SELECT count(*) AS n FROM approvals WHERE status = 'pending'")
    return int(rows[0]["n"])


# The timeline's events of this table: (at, kind, ref, summary, status) rows.
TIMELINE = (
    "SELECT requested_at, 'approval_requested', id::text, tool_name, status FROM approvals",
    "SELECT decided_at, 'approval_decided', id::text, tool_name || ' ' || status, status "
    "FROM approvals WHERE decided_at IS NOT NULL",
)


ORPHANED = "the butler restarted while the call was held; the call did not run"


class ApprovalStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def request(
        self, tool_name: str, tool_args: dict[str, Any], session_id: str | None, seconds: float
    ) -> uuid.UUID:
        approval_id: uuid.UUID = await self._pool.fetchval(
            "INSERT INTO approvals (tool_name, tool_args, session_id, expires_at) "
            "VALUES ($1, $2::text::jsonb, $3, clock_timestamp() + make_interval(secs => $4)) "
            "RETURNING id",
            tool_name,
            dumps(tool_args),
            session_id,
            seconds,
        )
        return approval_id

    async def propose(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        session_id: str | None,
        seconds: float,
        max_pending: int,
    ) -> uuid.UUID | None:
        """A proposal (no held call: approving it runs the call then); None when
        `max_pending` proposals are already pending."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('butlers.proposals'))")
            pending = await conn.fetchval(
                "SELECT count(*) FROM approvals WHERE kind = 'proposal' AND status = 'pending'"
            )
            if pending >= max_pending:
                return None
            approval_id: uuid.UUID = await conn.fetchval(
                "INSERT INTO approvals (tool_name, tool_args, session_id, expires_at, kind) "
                "VALUES ($1, $2::text::jsonb, $3, clock_timestamp() + make_interval(secs => $4), "
                "'proposal') RETURNING id",
                tool_name,
                dumps(tool_args),
                session_id,
                seconds,
            )
        return approval_id

    async def is_proposal(self, approval_id: uuid.UUID) -> bool:
        kind = await self._pool.fetchval("SELECT kind FROM approvals WHERE id = $1", approval_id)
        return bool(kind == "proposal")

    async def status(self, approval_id: uuid.UUID) -> str:
        value: str = await self._pool.fetchval(
            "SELECT status FROM approvals WHERE id = $1", approval_id
        )
        return value

    async def expire(
        self, approval_id: uuid.UUID, reason: str = "no decision before the deadline"
    ) -> bool:
        """Mark a still-pending request expired; False when a decision got there first."""
        result = await self._pool.execute(
            "UPDATE approvals SET status = 'expired', decided_at = clock_timestamp(), "
            "decided_by = 'system', reason = $2 WHERE id = $1 AND status = 'pending'",
            approval_id,
            reason,
        )
        return affected(result) > 0

    async def not_run(self, approval_id: uuid.UUID, reason: str) -> None:
        """A decision was recorded but its held call did not take it: the request is
        `expired` (who decided is kept), never a decision for a call that did not run."""
        await self._pool.execute(
            "UPDATE approvals SET status = 'expired', reason = $2 "
            "WHERE id = $1 AND status IN ('approved', 'denied')",
            approval_id,
            reason,
        )

    async def expire_orphans(self) -> int:
        """At start-up: every pending request belonged to a held call of a process that is
        gone (nothing holds it any more, so it can never run); mark them expired."""
        result = await self._pool.execute(
            "UPDATE approvals SET status = 'expired', decided_at = clock_timestamp(), "
            "decided_by = 'system', reason = $1 WHERE status = 'pending' AND kind = 'call'",
            ORPHANED,
        )
        return int(result.split()[-1])

    async def expire_stale(self) -> list[uuid.UUID]:
        """Expire pending requests past their deadline that no held call is waiting on
        any more (its process died); returns their ids."""
        rows = await self._pool.fetch(
            "UPDATE approvals SET status = 'expired', decided_at = clock_timestamp(), "
            "decided_by = 'system', reason = 'stale: past its deadline with no call waiting' "
            "WHERE status = 'pending' AND expires_at < clock_timestamp() RETURNING id"
        )
        return [row["id"] for row in rows]

    async def decide(
        self, approval_id: uuid.UUID, status: str, decided_by: str, reason: str | None
    ) -> Approval | None:
        """Record a decision on a pending request still within its deadline; a pending
        request past it becomes `expired` instead. None when it was not pending."""
        row = await self._pool.fetchrow(
            f"""
            UPDATE approvals SET
                status = CASE WHEN expires_at > clock_timestamp() THEN $2 ELSE 'expired' END,
                decided_at = clock_timestamp(),
                decided_by = CASE WHEN expires_at > clock_timestamp() THEN $3 ELSE 'system' END,
                reason = CASE WHEN expires_at > clock_timestamp() THEN $4
                              ELSE 'no decision before the deadline' END
            WHERE id = $1 AND status = 'pending'
            RETURNING {COLUMNS}
            """,
            approval_id,
            status,
            decided_by,
            reason,
        )
        return Approval.from_row(row) if row else None

    async def get(self, approval_id: uuid.UUID) -> Approval | None:
        row = await self._pool.fetchrow(
            f"SELECT {COLUMNS} FROM approvals WHERE id = $1", approval_id
        )
        return Approval.from_row(row) if row else None

    async def list(self, status: str | None, limit: int) -> list[Approval]:
        rows = await self._pool.fetch(
            f"SELECT {COLUMNS} FROM approvals WHERE ($1::text IS NULL OR status = $1) "
            "ORDER BY requested_at DESC LIMIT $2",
            status,
            limit,
        )
        return [Approval.from_row(row) for row in rows]


# What the dashboard's live feed re-reads when a trigger publishes a changed row's id.
APPROVAL_CHANGES = Changes(
    "approvals",
    "id",
    "id, tool_name, session_id, status, requested_at, expires_at, decided_at, decided_by",
    "requested_at >= $1::timestamptz OR decided_at >= $1",
    events={"pending": "approval_requested"},
    default="approval_decided",
    start=("approval_requested", "pending"),
)


async def pending_for(db: Reader, tool_name: str, argument: str, value: str) -> uuid.UUID | None:
    """The newest pending approval of a call of `tool_name` whose `argument` is `value`."""
    rows = await db.fetch(
        "SELECT id FROM approvals WHERE status = 'pending' AND tool_name = $1 "
        "AND tool_args->>$2 = $3 ORDER BY requested_at DESC LIMIT 1",
        tool_name,
        argument,
        value,
    )
    return rows[0]["id"] if rows else None
