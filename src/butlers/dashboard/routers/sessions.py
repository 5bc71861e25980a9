"""Sessions: the cross-butler list (exact total, offset or keyset pages) and details.

The order is (started_at, butler, id), newest first, the same on every butler, so a
keyset cursor (the last item's key) continues every butler's part exactly where
the previous page ended: each page costs the same at any depth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok, page
from butlers.dashboard.errors import NotFound
from butlers.dashboard.pagination import (
    Cursor,
    Limit,
    Offset,
    cursor_position,
    cursor_time,
    decode_cursor,
    encode_cursor,
)
from butlers.dashboard.sql import Where, parse_uuid
from butlers.modules.approvals import store as approvals_store
from butlers.pricing import cost_usd
from butlers.stores.sessions import LLM_CALL_COLUMNS, SessionStatus

router = APIRouter(tags=["sessions"])
MIN_UUID = "00000000-0000-0000-0000-000000000000"
MAX_UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
# What started a session, from its `trigger_source` (the butler records these): the
# switchboard's classifier, a message routed to this butler, a schedule or job, the
# butler's own upkeep (memory consolidation), or a person (the dashboard, `trigger`).
SessionKind = Literal["classification", "message", "scheduled", "maintenance", "manual"]
SESSION_KINDS: tuple[str, ...] = get_args(SessionKind)
KIND_SQL = (
    "CASE WHEN trigger_source = 'classify' OR trigger_source LIKE 'classify:%' "
    "THEN 'classification' WHEN trigger_source LIKE 'switchboard:%' THEN 'message' "
    "WHEN trigger_source LIKE 'schedule:%' OR trigger_source LIKE 'job:%' THEN 'scheduled' "
    "WHEN trigger_source = 'memory_consolidation' THEN 'maintenance' ELSE 'manual' END"
)
SUMMARY = (
    f"{KIND_SQL} AS kind, session_id, trigger_source, status, model, created_at, "
    "completed_at, duration_ms, "
    "input_tokens, output_tokens, cached_tokens, cache_write_tokens, cost_usd, trace_id, error, "
    "left(prompt, 200) AS prompt_preview, "
    "jsonb_array_length(tool_calls) AS tool_call_count, llm_call_count"
)


class SessionSummary(BaseModel):
    id: str
    butler: str
    trigger_source: str
    kind: SessionKind
    status: SessionStatus
    model: str | None
    started_at: datetime
    completed_at: datetime | None
    duration_ms: int | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None  # of the input, read from the provider's prompt cache
    cache_write_tokens: int | None  # of the input, written to it
    cost_usd: float | None
    priced: bool  # False: cost unknown (no price for the model, no token counts, running)
    trace_id: str | None
    error: str | None
    prompt_preview: str
    tool_call_count: int
    llm_call_count: int | None  # None: recorded before model calls were counted


class ToolCallRecord(BaseModel):
    name: str
    arguments: Any = None
    result: Any = None
    is_error: bool = False
    started_at: datetime | None = None
    duration_ms: float | None = None


class LlmCallInfo(BaseModel):
    """One model call: the messages sent since the previous call, the reply, tokens
    and timing (request and response redacted, and truncated past 32,000 characters)."""

    seq: int
    model: str | None
    started_at: datetime
    duration_ms: float
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    # From the built-in price table (None: unknown model or token counts).
    cost_usd: float | None = None
    request: Any
    response: Any
    error: str | None


class SessionApproval(BaseModel):
    id: str
    tool_name: str
    status: str
    requested_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None


class SessionDetail(SessionSummary):
    prompt: str
    output: str | None
    tool_calls: list[ToolCallRecord]
    llm_calls: list[LlmCallInfo]
    context: Any
    request_id: str | None
    approvals: list[SessionApproval]


def summary_of(butler: str, row: Any) -> SessionSummary:
    cost = row["cost_usd"]
    return SessionSummary(
        id=str(row["session_id"]),
        butler=butler,
        trigger_source=row["trigger_source"],
        kind=row["kind"],
        status=row["status"],
        model=row["model"],
        started_at=row["created_at"],
        completed_at=row["completed_at"],
        duration_ms=row["duration_ms"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cached_tokens=row["cached_tokens"],
        cache_write_tokens=row["cache_write_tokens"],
        cost_usd=float(cost) if cost is not None else None,
        priced=cost is not None,
        trace_id=row["trace_id"],
        error=row["error"],
        prompt_preview=row["prompt_preview"] or "",
        tool_call_count=row["tool_call_count"] or 0,
        llm_call_count=row["llm_call_count"],
    )


def session_filters(
    status: SessionStatus | None = None,
    trigger_source: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    trace_id: str | None = None,
    model: str | None = None,
    kind: Annotated[
        list[SessionKind] | None, Query(description="Only sessions of these kinds.")
    ] = None,
) -> Where:
    """The filters both session listings take, as query parameters."""
    where = Where()
    where.when(status, "status = {}").when(trigger_source, "trigger_source = {}")
    if kind:
        where.add(f"({KIND_SQL}) = ANY({{}}::text[])", sorted({str(k) for k in kind}))
    where.when(since, "created_at >= {}").when(until, "created_at < {}")
    return where.when(trace_id, "trace_id = {}").when(model, "model = {}")


Filters = Annotated[Where, Depends(session_filters)]


async def list_sessions(
    dashboard: Dashboard,
    butlers: list[str],
    where: Where,
    offset: int,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    count_sql = f"SELECT count(*) FROM sessions{where.sql()}"
    order = " ORDER BY created_at DESC, session_id DESC"
    per_butler: dict[str, Sequence[Any]] | None = None
    if cursor:
        fields = decode_cursor(cursor, "t", "b", "i")
        at, last_butler, last_id = cursor_time(fields), str(fields["b"]), str(fields["i"])
        offset = cursor_position(fields)
        keyset = Where(first_param=len(where.args) + 1)
        keyset.add("(created_at, session_id) < ({}, {}::uuid)", at, MIN_UUID)
        clauses = [*where.clauses, *keyset.clauses]
        page_sql = (
            f"SELECT {SUMMARY} FROM sessions WHERE {' AND '.join(clauses)}{order} LIMIT {limit}"
        )
        per_butler = {}
        for name in butlers:
            bound = MIN_UUID if name > last_butler else MAX_UUID
            per_butler[name] = [*where.args, at, last_id if name == last_butler else bound]
    else:
        page_sql = f"SELECT {SUMMARY} FROM sessions{where.sql()}{order} LIMIT {offset + limit}"
    counts, rows = await asyncio.gather(
        dashboard.db.fan_out(count_sql, *where.args, butler_names=butlers),
        dashboard.db.fan_out(
            page_sql, *where.args, butler_names=butlers, per_butler_args=per_butler
        ),
    )
    # Merge on the sort key, then build models for the page only.
    merged = sorted(
        ((row["created_at"], name, str(row["session_id"]), row) for name, row in rows.rows()),
        key=lambda item: item[:3],
        reverse=True,
    )
    chosen = merged[:limit] if cursor else merged[offset : offset + limit]
    items = [summary_of(name, row) for _at, name, _id, row in chosen]
    total = sum(int(r[0]["count"]) for r in counts.results.values() if r)
    failed = sorted(set(counts.failed_butlers) | set(rows.failed_butlers))
    next_cursor = None
    if items and offset + len(items) < total:
        last = items[-1]
        next_cursor = encode_cursor(
            t=last.started_at.isoformat(), b=last.butler, i=last.id, p=offset + len(items)
        )
    return page(
        items,
        total=total,
        offset=offset,
        limit=limit,
        next_cursor=next_cursor,
        failed_butlers=failed,
    )


ButlerFilter = Annotated[list[str] | None, Query(description="Only these butlers.")]


@router.get("/api/sessions", response_model=PaginatedResponse[SessionSummary])
async def sessions(
    dashboard: Ctx,
    *,
    butler: ButlerFilter = None,
    where: Filters,
    offset: Offset = 0,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """Sessions of every butler merged newest first, with the exact total across butlers."""
    names = sorted(dashboard.butlers())
    if butler:
        for name in butler:
            dashboard.butler(name)
        names = sorted(set(butler))
    return await list_sessions(dashboard, names, where, offset, limit, cursor)


class KindCount(BaseModel):
    kind: SessionKind
    count: int


@router.get("/api/sessions/kinds", response_model=ApiResponse[list[KindCount]])
async def session_kinds(
    dashboard: Ctx, *, butler: ButlerFilter = None, where: Filters
) -> dict[str, Any]:
    """How many sessions of each kind match the filters (every kind, zeros included)."""
    names = sorted(dashboard.butlers())
    if butler:
        for name in butler:
            dashboard.butler(name)
        names = sorted(set(butler))
    fan = await dashboard.db.fan_out(
        f"SELECT {KIND_SQL} AS kind, count(*) AS n FROM sessions{where.sql()} GROUP BY 1",
        *where.args,
        butler_names=names,
    )
    counts = dict.fromkeys(SESSION_KINDS, 0)
    for _name, row in fan.rows():
        counts[row["kind"]] += int(row["n"])
    return ok(
        [KindCount(kind=k, count=n) for k, n in counts.items()],  # type: ignore[arg-type]
        failed_butlers=fan.failed_butlers,
    )


@router.get("/api/butlers/{name}/sessions", response_model=PaginatedResponse[SessionSummary])
async def butler_sessions(
    name: str,
    dashboard: Ctx,
    where: Filters,
    offset: Offset = 0,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    dashboard.butler(name)
    return await list_sessions(dashboard, [name], where, offset, limit, cursor)


@router.get("/api/butlers/{name}/sessions/{session_id}", response_model=ApiResponse[SessionDetail])
async def session_detail(name: str, session_id: str, dashboard: Ctx) -> dict[str, Any]:
    """One session: prompt, output or error, tool calls with timing, its model calls
    (tokens, timing, request and response), cost, approvals."""
    return ok(await read_session(dashboard, name, session_id))


@router.post(
    "/api/butlers/{name}/sessions/{session_id}/cancel", response_model=ApiResponse[SessionDetail]
)
async def cancel_session(
    name: str, session_id: str, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Stop a running session (the butler's `session_cancel`, audited): its runtime is
    stopped and it ends `cancelled`. A session not running is TOOL_ERROR."""
    info = dashboard.butler(name)
    key = parse_uuid(session_id, "session id")
    await dashboard.write(
        request,
        info,
        "session.cancel",
        "session_cancel",
        {"session_id": str(key)},
        target=str(key),
    )
    return ok(await read_session(dashboard, name, session_id))


async def read_session(dashboard: Dashboard, name: str, session_id: str) -> SessionDetail:
    info = dashboard.butler(name)
    key = parse_uuid(session_id, "session id")
    row = await dashboard.db.fetchrow(
        name,
        f"SELECT {SUMMARY}, prompt, output, tool_calls, context FROM sessions "
        "WHERE session_id = $1",
        key,
    )
    if row is None:
        raise NotFound(f"no session {session_id} on butler {name!r}", butler=name)
    calls = await dashboard.db.fetch(
        name, f"SELECT {LLM_CALL_COLUMNS} FROM llm_calls WHERE session_id = $1 ORDER BY seq", key
    )
    approvals: list[SessionApproval] = []
    if "approvals" in info.modules:
        for approval in await dashboard.db.read(
            name, lambda pool: approvals_store.session_approvals(pool, [str(key)])
        ):
            approvals.append(SessionApproval(**{**asdict(approval), "id": str(approval.id)}))
    context = row["context"]
    request_id = context.get("request_id") if isinstance(context, dict) else None
    detail = SessionDetail(
        **summary_of(name, row).model_dump(),
        prompt=row["prompt"],
        output=row["output"],
        tool_calls=[ToolCallRecord.model_validate(c) for c in row["tool_calls"] or []],
        llm_calls=[_llm_call(dict(call)) for call in calls],
        context=context,
        request_id=request_id,
        approvals=approvals,
    )
    return detail


def _llm_call(row: dict[str, Any]) -> LlmCallInfo:
    cost = cost_usd(
        row["model"],
        row["input_tokens"],
        row["output_tokens"],
        cached_tokens=row["cached_tokens"],
        cache_write_tokens=row["cache_write_tokens"],
    )
    return LlmCallInfo.model_validate(row | {"cost_usd": cost})
