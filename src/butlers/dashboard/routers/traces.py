"""Traces: one message (or trigger) followed across butlers by its `trace_id`.

A trace's tree: the inbox message, its classification session, each route to a
target butler, the session the target ran, that session's tool calls, and the
approvals its gated calls waited for. Sessions outside any route (a direct
trigger, a schedule) are roots of their own. Cost is the sum of the sessions'.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok, page
from butlers.dashboard.errors import NotFound
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.routers.sessions import SUMMARY
from butlers.dashboard.trace_tree import TraceDetail, build_trace
from butlers.modules.approvals import store as approvals_store
from butlers.modules.switchboard import store as switchboard

router = APIRouter(tags=["traces"])
MAX_TRACES_PER_BUTLER = 20_000
SWITCHBOARD = "switchboard"


class TraceSummary(BaseModel):
    trace_id: str
    request_id: str | None
    message_preview: str | None
    started_at: datetime
    ended_at: datetime | None
    duration_ms: float | None
    status: str  # running | error | ok
    butlers: list[str]
    session_count: int
    cost_usd: float
    unpriced_sessions: int


async def _trace_of_request(dashboard: Dashboard, request_id: str) -> str | None:
    try:
        key = uuid.UUID(request_id)
    except ValueError:
        return None
    fan = await dashboard.db.fan_read(
        lambda pool: switchboard.trace_of_request(pool, key), dashboard.with_module(SWITCHBOARD)
    )
    return next((found for _name, found in fan.items() if found), None)


async def load_trace(dashboard: Dashboard, trace_ref: str) -> TraceDetail:
    trace_id = await _trace_of_request(dashboard, trace_ref) or trace_ref
    boards = dashboard.with_module(SWITCHBOARD)
    messages, routes, sessions = await asyncio.gather(
        dashboard.db.fan_read(lambda pool: switchboard.trace_messages(pool, trace_id), boards),
        dashboard.db.fan_read(lambda pool: switchboard.trace_routes(pool, trace_id), boards),
        dashboard.db.fan_out(
            f"SELECT {SUMMARY}, tool_calls FROM sessions WHERE trace_id = $1",
            trace_id,
        ),
    )
    session_ids = [str(row["session_id"]) for _n, row in sessions.rows()]
    approvals = await dashboard.db.fan_read(
        lambda pool: approvals_store.session_approvals(pool, session_ids),
        [n for n in dashboard.with_module("approvals") if n in sessions.results],
    )
    if not any(sessions.results.values()) and not any(messages.results.values()):
        raise NotFound(f"no trace {trace_ref!r} (a trace id, or a message's request id)")
    failed = sorted({*messages.failed, *routes.failed, *sessions.failed, *approvals.failed})
    return build_trace(trace_id, messages, routes, sessions, approvals, failed)


@router.get("/api/traces", response_model=PaginatedResponse[TraceSummary])
async def list_traces(
    dashboard: Ctx,
    since: datetime | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Traces newest first, each with its butlers, session count, status and cost."""
    since_clause = " AND created_at >= $1" if since else ""
    args = [since] if since else []
    fan = await dashboard.db.fan_out(
        "SELECT trace_id, min(created_at) AS started_at, "
        "max(coalesce(completed_at, created_at)) AS ended_at, count(*) AS sessions, "
        "sum(cost_usd) AS cost, count(*) FILTER (WHERE cost_usd IS NULL AND status <> "
        "'running') AS unpriced, bool_or(status = 'error') AS failed, "
        "bool_or(status = 'running') AS running FROM sessions "
        f"WHERE trace_id IS NOT NULL{since_clause} GROUP BY trace_id "
        f"ORDER BY started_at DESC LIMIT {MAX_TRACES_PER_BUTLER}",
        *args,
    )
    traces: dict[str, dict[str, Any]] = {}
    for name, row in fan.rows():
        entry = traces.setdefault(
            row["trace_id"],
            {
                "started_at": row["started_at"],
                "ended_at": row["ended_at"],
                "butlers": set(),
                "sessions": 0,
                "cost": 0.0,
                "unpriced": 0,
                "failed": False,
                "running": False,
            },
        )
        entry["started_at"] = min(entry["started_at"], row["started_at"])
        entry["ended_at"] = max(entry["ended_at"], row["ended_at"])
        entry["butlers"].add(name)
        entry["sessions"] += row["sessions"]
        entry["cost"] += float(row["cost"] or 0)
        entry["unpriced"] += row["unpriced"]
        entry["failed"] |= row["failed"]
        entry["running"] |= row["running"]
    ordered = sorted(traces.items(), key=lambda kv: (kv[1]["started_at"], kv[0]), reverse=True)
    chosen = ordered[offset : offset + limit]
    chosen_ids = [trace_id for trace_id, _e in chosen]
    messages = await dashboard.db.fan_read(
        lambda pool: switchboard.trace_previews(pool, chosen_ids),
        dashboard.with_module(SWITCHBOARD),
    )
    by_trace = {preview.trace_id: preview for _n, preview in messages.rows()}
    items = []
    for trace_id, entry in chosen:
        message = by_trace.get(trace_id)
        ended = None if entry["running"] else entry["ended_at"]
        items.append(
            TraceSummary(
                trace_id=trace_id,
                request_id=str(message.request_id) if message else None,
                message_preview=message.preview if message else None,
                started_at=entry["started_at"],
                ended_at=ended,
                duration_ms=(ended - entry["started_at"]).total_seconds() * 1000 if ended else None,
                status="running" if entry["running"] else "error" if entry["failed"] else "ok",
                butlers=sorted(entry["butlers"]),
                session_count=entry["sessions"],
                cost_usd=round(entry["cost"], 6),
                unpriced_sessions=entry["unpriced"],
            )
        )
    failed = sorted(set(fan.failed_butlers) | set(messages.failed_butlers))
    return page(items, total=len(traces), offset=offset, limit=limit, failed_butlers=failed)


@router.get("/api/traces/{trace_id}", response_model=ApiResponse[TraceDetail])
async def trace_detail(
    trace_id: Annotated[str, Path(min_length=1, max_length=64)], dashboard: Ctx
) -> dict[str, Any]:
    """The whole tree of one trace; `trace_id` may also be a message's request id."""
    detail = await load_trace(dashboard, trace_id)
    return ok(detail, failed_butlers=detail.failed_butlers)
