"""The timeline: every butler's events (sessions, approvals, messages, routes,
deliveries) merged newest first, paged with a keyset cursor."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import PaginatedResponse, page
from butlers.dashboard.pagination import Cursor, Limit, cursor_time, decode_cursor, encode_cursor
from butlers.modules.approvals import store as approvals
from butlers.modules.messenger import store as messenger
from butlers.modules.switchboard import store as switchboard

router = APIRouter(tags=["timeline"])
Kind = Literal[
    "session_start",
    "session_end",
    "approval_requested",
    "approval_decided",
    "message_received",
    "route",
    "delivery",
    "butler_start",
]
# Each source's events as (at, kind, ref, summary, status) rows: the sessions here, a
# module's tables in its store.
BRANCHES: dict[str | None, Sequence[str]] = {
    None: (
        "SELECT created_at AS at, 'session_start' AS kind, session_id::text AS ref, "
        "trigger_source AS summary, status FROM sessions",
        "SELECT completed_at, 'session_end', session_id::text, "
        "coalesce(left(error, 200), 'completed'), status FROM sessions "
        "WHERE completed_at IS NOT NULL",
        # A start after a run that never stopped cleanly followed a crash or a kill.
        "SELECT started_at, 'butler_start', number::text, CASE WHEN number = 1 "
        "THEN 'first start' ELSE 'restart #' || (number - 1) || CASE WHEN lag(number) "
        "OVER w IS NOT NULL AND lag(stopped_at) OVER w IS NULL THEN ' after a crash' "
        "ELSE '' END END, CASE WHEN number = 1 THEN 'started' WHEN lag(number) OVER w "
        "IS NOT NULL AND lag(stopped_at) OVER w IS NULL THEN 'crashed' ELSE 'restarted' "
        "END FROM butler_starts WINDOW w AS (ORDER BY number)",
    ),
    "approvals": approvals.TIMELINE,
    "switchboard": switchboard.TIMELINE,
    "messenger": messenger.TIMELINE,
}


class TimelineEvent(BaseModel):
    at: datetime
    butler: str
    kind: Kind
    ref: str  # the session, approval, request, route or delivery id
    summary: str
    status: str


def _sql(modules: tuple[str, ...], kinds: list[str] | None, keyset: bool, limit: int) -> str:
    branches = [
        b for module, rows in BRANCHES.items() if module is None or module in modules for b in rows
    ]
    where = []
    params = 0
    if keyset:
        where.append(
            '(at < $1 OR (at = $1 AND ($4::bool OR (kind COLLATE "C", ref COLLATE "C") '
            "< ($2, $3))))"
        )
        params = 4
    if kinds:
        where.append(f"kind = ANY(${params + 1}::text[])")
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return (
        f"SELECT * FROM ({' UNION ALL '.join(branches)}) events{condition} "
        f'ORDER BY at DESC, kind COLLATE "C" DESC, ref COLLATE "C" DESC LIMIT {limit}'
    )


@router.get("/api/timeline", response_model=PaginatedResponse[TimelineEvent])
async def timeline(
    dashboard: Ctx,
    butler: Annotated[list[str] | None, Query()] = None,
    kind: Annotated[list[Kind] | None, Query()] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """Newest first. `meta.total` counts the events of this page and those before it that
    the cursor walked; `meta.next_cursor` continues (null at the end)."""
    butlers = dashboard.butlers()
    names = sorted(butler) if butler else sorted(butlers)
    for name in names:
        dashboard.butler(name)
    fields = decode_cursor(cursor, "t", "b", "k", "r") if cursor else None
    kinds = [str(k) for k in kind] if kind else None
    results = {}
    failed: list[str] = []

    async def one(name: str) -> None:
        sql = _sql(butlers[name].modules, kinds, fields is not None, limit)
        args: list[Any] = []
        if fields is not None:
            at, last = cursor_time(fields), str(fields["b"])
            same = name == last
            args = [at, fields["k"] if same else "", fields["r"] if same else "", name < last]
        if kinds:
            args.append(kinds)
        fan = await dashboard.db.fan_out(sql, *args, butler_names=[name])
        results[name] = fan.results.get(name, [])
        failed.extend(fan.failed_butlers)

    await asyncio.gather(*(one(n) for n in names))
    events = sorted(
        (
            TimelineEvent(
                at=r["at"],
                butler=n,
                kind=r["kind"],
                ref=r["ref"],
                summary=r["summary"] or "",
                status=r["status"],
            )
            for n, rows in results.items()
            for r in rows
        ),
        key=lambda e: (e.at, e.butler, e.kind, e.ref),
        reverse=True,
    )[:limit]
    position = int(fields.get("p", 0)) if fields else 0
    more = len(events) == limit
    next_cursor = None
    if more:
        last_event = events[-1]
        next_cursor = encode_cursor(
            t=last_event.at.isoformat(),
            b=last_event.butler,
            k=last_event.kind,
            r=last_event.ref,
            p=position + len(events),
        )
    total = position + len(events) + (1 if more else 0)
    return page(
        events,
        total=total,
        offset=position,
        limit=limit,
        next_cursor=next_cursor,
        failed_butlers=sorted(failed),
        total_is_exact=not more,
    )
