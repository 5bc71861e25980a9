"""Assembling one trace's rows (messages, routes, sessions, approvals) into a tree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from butlers.dashboard.db import FanOut, FanRead
from butlers.modules.approvals.store import SessionApproval
from butlers.modules.switchboard.store import TraceMessage, TraceRoute

LATEST = datetime.max.replace(tzinfo=UTC)
SpanKind = Literal["message", "classification", "route", "session", "tool_call", "approval"]


class TraceSpan(BaseModel):
    id: str
    kind: SpanKind
    butler: str | None
    name: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    duration_ms: float | None
    cost_usd: float | None = None
    attributes: dict[str, Any] = {}
    children: list[TraceSpan] = []


class TraceDetail(BaseModel):
    trace_id: str
    request_id: str | None
    started_at: datetime | None
    ended_at: datetime | None
    duration_ms: float | None
    status: str  # running | error | ok
    butlers: list[str]
    session_count: int
    tool_call_count: int
    cost_usd: float
    unpriced_sessions: int
    spans: list[TraceSpan]
    failed_butlers: list[str]


def _ms(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 3)


def _tool_calls(
    session_id: str, butler: str, row: Any, approvals: list[SessionApproval]
) -> list[TraceSpan]:
    pending = list(approvals)
    spans = []
    for index, call in enumerate(row["tool_calls"] or []):
        if not isinstance(call, dict):
            continue
        started = _time(call.get("started_at"))
        duration = call.get("duration_ms")
        ended = started + timedelta(milliseconds=duration) if started and duration else None
        children = []
        match = next((a for a in pending if a.tool_name == call.get("name")), None)
        if match is not None:
            pending.remove(match)
            children.append(_approval(butler, match))
        spans.append(
            TraceSpan(
                id=f"tool:{session_id}:{index}",
                kind="tool_call",
                butler=butler,
                name=str(call.get("name")),
                status="error" if call.get("is_error") else "ok",
                started_at=started,
                ended_at=ended,
                duration_ms=duration,
                attributes={"arguments": call.get("arguments")},
                children=children,
            )
        )
    return spans + [_approval(butler, a) for a in pending]


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _approval(butler: str, row: SessionApproval) -> TraceSpan:
    return TraceSpan(
        id=f"approval:{row.id}",
        kind="approval",
        butler=butler,
        name=f"approval of {row.tool_name}",
        status=row.status,
        started_at=row.requested_at,
        ended_at=row.decided_at,
        duration_ms=_ms(row.requested_at, row.decided_at),
        attributes={"decided_by": row.decided_by, "reason": row.reason},
    )


def _session(butler: str, row: Any, approvals: list[SessionApproval], kind: SpanKind) -> TraceSpan:
    session_id = str(row["session_id"])
    cost = row["cost_usd"]
    return TraceSpan(
        id=f"session:{session_id}",
        kind=kind,
        butler=butler,
        name=f"{butler} session ({row['trigger_source']})",
        status=row["status"],
        started_at=row["created_at"],
        ended_at=row["completed_at"],
        duration_ms=row["duration_ms"],
        cost_usd=float(cost) if cost is not None else None,
        attributes={
            "session_id": session_id,
            "trigger_source": row["trigger_source"],
            "model": row["model"],
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "error": row["error"],
            "priced": cost is not None,
        },
        children=_tool_calls(session_id, butler, row, approvals),
    )


def build_trace(
    trace_id: str,
    messages: FanRead[list[TraceMessage]],
    routes: FanRead[list[TraceRoute]],
    sessions: FanOut,
    approvals: FanRead[list[SessionApproval]],
    failed: list[str],
) -> TraceDetail:
    by_session: dict[str, list[SessionApproval]] = {}
    for _name, approval in approvals.rows():
        by_session.setdefault(str(approval.session_id), []).append(approval)
    session_rows = {str(row["session_id"]): (name, row) for name, row in sessions.rows()}
    used: set[str] = set()
    roots: list[TraceSpan] = []
    request_ids: list[str] = []
    for board, message in messages.rows():
        request_id = str(message.request_id)
        request_ids.append(request_id)
        children: list[TraceSpan] = []
        for session_id, (name, row) in session_rows.items():
            if name == board and row["trigger_source"] == f"classify:{request_id}":
                used.add(session_id)
                children.append(
                    _session(name, row, by_session.get(session_id, []), "classification")
                )
        for route_board, route in routes.rows():
            if route_board != board or str(route.request_id) != request_id:
                continue
            target = str(route.session_id) if route.session_id else None
            route_children = []
            if target and target in session_rows:
                used.add(target)
                name, row = session_rows[target]
                route_children.append(_session(name, row, by_session.get(target, []), "session"))
            route_end = route.created_at
            route_start = route_end - timedelta(milliseconds=route.duration_ms)
            children.append(
                TraceSpan(
                    id=f"route:{route.route_id}",
                    kind="route",
                    butler=route.butler,
                    name=f"route to {route.butler}",
                    status=route.status,
                    started_at=route_start,
                    ended_at=route_end,
                    duration_ms=route.duration_ms,
                    attributes={"segment": route.segment, "error": route.error},
                    children=route_children,
                )
            )
        children.sort(key=lambda s: (s.started_at or LATEST, s.id))
        roots.append(
            TraceSpan(
                id=f"message:{request_id}",
                kind="message",
                butler=board,
                name=f"message from {message.channel}",
                status=message.status,
                started_at=message.received_at,
                ended_at=message.completed_at,
                duration_ms=_ms(message.received_at, message.completed_at),
                attributes={
                    "request_id": request_id,
                    "channel": message.channel,
                    "sender": message.sender,
                    "text": message.text,
                    "classification": message.classification,
                },
                children=children,
            )
        )
    for session_id, (name, row) in session_rows.items():
        if session_id not in used:
            roots.append(_session(name, row, by_session.get(session_id, []), "session"))
    roots.sort(key=lambda s: (s.started_at or LATEST, s.id))
    rows = [row for _id, (_n, row) in session_rows.items()]
    starts = [s.started_at for s in roots if s.started_at]
    ends = [s.ended_at for s in roots if s.ended_at]
    running = any(r["status"] == "running" for r in rows) or any(
        m.completed_at is None for _b, m in messages.rows()
    )
    ended = None if running or not ends else max(ends)
    started = min(starts) if starts else None
    priced = [float(r["cost_usd"]) for r in rows if r["cost_usd"] is not None]
    return TraceDetail(
        trace_id=trace_id,
        request_id=request_ids[0] if request_ids else None,
        started_at=started,
        ended_at=ended,
        duration_ms=_ms(started, ended),
        status="running"
        if running
        else "error"
        if any(r["status"] == "error" for r in rows)
        else "ok",
        butlers=sorted({name for name, _row in session_rows.values()}),
        session_count=len(rows),
        tool_call_count=sum(len(r["tool_calls"] or []) for r in rows),
        cost_usd=round(sum(priced), 6),
        unpriced_sessions=sum(
            1 for r in rows if r["cost_usd"] is None and r["status"] != "running"
        ),
        spans=roots,
        failed_butlers=failed,
    )
