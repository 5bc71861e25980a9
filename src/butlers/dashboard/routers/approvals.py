"""Approvals: the queue of held tool calls, their history, decisions, rules, metrics.

Rows are read from each approvals-enabled butler's `approvals` table; decisions go
through that butler's `approval_decide` tool, which releases (or refuses) the held
call. Rules live in the Butler spec (`spec.approvals.rules`) and in the tools'
own policies, so they are read-only here.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from butlers.dashboard.context import Ctx, Dashboard, actor
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.module_views import butlers_of, listing_page
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import parse_uuid
from butlers.modules.approvals import store

router = APIRouter(tags=["approvals"])
MODULE = "approvals"
DECIDED = store.DECIDED


Requester = Literal["session", "dashboard", "client"]


class ApprovalAction(BaseModel):
    id: str
    butler: str
    tool_name: str
    tool_args: dict[str, Any]
    # The butler session whose call is held (None: a direct call, not a session).
    session_id: str | None
    # Who asked: one of the butler's LLM sessions (`session_id`), this dashboard (its
    # tool form), or another MCP client (`client_session` is its MCP session).
    requested_by: Requester | None
    client_session: str | None
    status: Literal["pending", "approved", "denied", "expired"]
    requested_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None
    seconds_left: float | None  # pending only: time until the held call gives up


class Decision(BaseModel):
    reason: Annotated[str | None, Field(max_length=2000)] = None


class StaleExpired(BaseModel):
    expired: dict[str, list[str]]


class ApprovalMetrics(BaseModel):
    pending: int
    approved: int
    denied: int
    expired: int
    total: int
    approval_rate: float | None  # approved / decided by a person
    median_decision_seconds: float | None
    oldest_pending_at: datetime | None
    by_butler: dict[str, dict[str, int]]
    by_tool: dict[str, dict[str, int]]


def _requester(dashboard: Dashboard, requester: str | None) -> Requester | None:
    """A gated call records the butler session that made it (a UUID, as sessions are
    keyed), else the MCP session of the direct caller (an opaque token)."""
    if not requester:
        return None
    try:
        if str(uuid.UUID(requester)) == requester:
            return "session"
    except ValueError:
        pass
    return "dashboard" if dashboard.clients.opened_session(requester) else "client"


def action_of(dashboard: Dashboard, butler: str, row: Any) -> ApprovalAction:
    now = datetime.now(UTC)
    left = (row["expires_at"] - now).total_seconds() if row["status"] == "pending" else None
    requested_by = _requester(dashboard, row["session_id"])
    return ApprovalAction(
        id=str(row["id"]),
        butler=butler,
        tool_name=row["tool_name"],
        tool_args=row["tool_args"] or {},
        session_id=row["session_id"] if requested_by == "session" else None,
        requested_by=requested_by,
        client_session=row["session_id"] if requested_by not in (None, "session") else None,
        status=row["status"],
        requested_at=row["requested_at"],
        expires_at=row["expires_at"],
        decided_at=row["decided_at"],
        decided_by=row["decided_by"],
        reason=row["reason"],
        seconds_left=max(0.0, left) if left is not None else None,
    )


async def _actions(
    dashboard: Dashboard, statuses: tuple[str, ...], butler: str | None, offset: int, limit: int
) -> dict[str, Any]:
    listing = store.PENDING if statuses == ("pending",) else store.SETTLED
    return await listing_page(
        dashboard,
        listing,
        butlers_of(dashboard, MODULE, butler),
        {"statuses": list(statuses)},
        offset=offset,
        limit=limit,
        build=lambda butler, row: action_of(dashboard, butler, row),
    )


async def find_action(dashboard: Dashboard, action_id: str) -> ApprovalAction:
    key = parse_uuid(action_id, "approval id")
    fan = await dashboard.db.fan_read(
        lambda pool: store.approval(pool, key), dashboard.with_module(MODULE)
    )
    for name, found in fan.items():
        if found is not None:
            return action_of(dashboard, name, asdict(found))
    where = f" (not readable: {', '.join(fan.failed_butlers)})" if fan.failed else ""
    raise NotFound(f"no approval {action_id}{where}")


ButlerQuery = Annotated[str | None, Query(description="Only this butler.")]


@router.get("/api/approvals/actions", response_model=PaginatedResponse[ApprovalAction])
async def pending_actions(
    dashboard: Ctx, butler: ButlerQuery = None, offset: Offset = 0, limit: Limit = 50
) -> dict[str, Any]:
    """Held calls waiting for a decision, oldest (closest to expiry) first."""
    return await _actions(dashboard, ("pending",), butler, offset, limit)


@router.get("/api/approvals/actions/executed", response_model=PaginatedResponse[ApprovalAction])
async def executed_actions(
    dashboard: Ctx,
    butler: ButlerQuery = None,
    status: Literal["approved", "denied", "expired"] | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Decided requests (approved, denied, expired), most recent decision first."""
    statuses = (status,) if status else DECIDED
    return await _actions(dashboard, statuses, butler, offset, limit)


@router.post("/api/approvals/actions/expire-stale", response_model=ApiResponse[StaleExpired])
async def expire_stale(request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Expire pending requests past their deadline whose held call is gone (audited)."""
    names = dashboard.with_module(MODULE)
    infos = [dashboard.butler(n) for n in names]
    outcomes = await asyncio.gather(
        *(
            dashboard.write(request, info, "approvals.expire_stale", "approval_expire_stale", {})
            for info in infos
        ),
        return_exceptions=True,
    )
    expired: dict[str, list[str]] = {}
    failed = []
    for info, outcome in zip(infos, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            failed.append(info.name)
            continue
        expired[info.name] = list((outcome.data or {}).get("expired") or [])
    return ok(StaleExpired(expired=expired), failed_butlers=failed)


@router.get("/api/approvals/actions/{action_id}", response_model=ApiResponse[ApprovalAction])
async def action_detail(action_id: str, dashboard: Ctx) -> dict[str, Any]:
    return ok(await find_action(dashboard, action_id))


async def _decide(
    request: Request, dashboard: Dashboard, action_id: str, decision: str, body: Decision | None
) -> dict[str, Any]:
    action = await find_action(dashboard, action_id)
    info = dashboard.butler(action.butler)
    arguments: dict[str, Any] = {
        "approval_id": action.id,
        "decision": decision,
        "decided_by": f"dashboard:{actor(request)}",
    }
    if body is not None and body.reason:
        arguments["reason"] = body.reason
    outcome = await dashboard.write(
        request, info, f"approval.{decision}", "approval_decide", arguments, target=action.id
    )
    row = dict(outcome.data)
    for key in ("requested_at", "expires_at", "decided_at"):
        if isinstance(row.get(key), str):
            row[key] = datetime.fromisoformat(row[key])
    return ok(action_of(dashboard, action.butler, row))


@router.post(
    "/api/approvals/actions/{action_id}/approve", response_model=ApiResponse[ApprovalAction]
)
async def approve(
    action_id: str, request: Request, dashboard: Ctx, body: Decision | None = None
) -> dict[str, Any]:
    """Approve: the held call runs. A request no longer pending is TOOL_ERROR."""
    return await _decide(request, dashboard, action_id, "approved", body)


@router.post(
    "/api/approvals/actions/{action_id}/reject", response_model=ApiResponse[ApprovalAction]
)
async def reject(
    action_id: str, request: Request, dashboard: Ctx, body: Decision | None = None
) -> dict[str, Any]:
    """Deny: the held call fails with the reason; nothing is done."""
    return await _decide(request, dashboard, action_id, "denied", body)


@router.get("/api/approvals/metrics", response_model=ApiResponse[ApprovalMetrics])
async def metrics(dashboard: Ctx) -> dict[str, Any]:
    fan = await dashboard.db.fan_read(store.approval_counts, dashboard.with_module(MODULE))
    counts = {"pending": 0, "approved": 0, "denied": 0, "expired": 0}
    by_butler: dict[str, dict[str, int]] = {}
    by_tool: dict[str, dict[str, int]] = {}
    medians: list[tuple[float, int]] = []
    oldest_pending: datetime | None = None
    rows = [(name, row) for name, found in fan.items() for row in found]
    for name, row in rows:
        status, n = row.status, int(row.n)
        counts[status] = counts.get(status, 0) + n
        by_butler.setdefault(name, {}).setdefault(status, 0)
        by_butler[name][status] += n
        by_tool.setdefault(row.tool_name, {}).setdefault(status, 0)
        by_tool[row.tool_name][status] += n
        if row.median is not None:
            medians.append((float(row.median), n))
        if status == "pending" and (oldest_pending is None or row.oldest < oldest_pending):
            oldest_pending = row.oldest
    decided = counts["approved"] + counts["denied"]
    median = None
    if medians:  # median of the groups' medians, weighted by their sizes
        ordered = sorted(medians)
        half, seen = sum(n for _m, n in ordered) / 2, 0
        for value, n in ordered:
            seen += n
            if seen >= half:
                median = round(value, 3)
                break
    result = ApprovalMetrics(
        **counts,
        total=sum(counts.values()),
        approval_rate=round(counts["approved"] / decided, 4) if decided else None,
        median_decision_seconds=median,
        oldest_pending_at=oldest_pending,
        by_butler=by_butler,
        by_tool=by_tool,
    )
    return ok(result, failed_butlers=fan.failed_butlers)
