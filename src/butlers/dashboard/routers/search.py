"""Search across butlers: sessions (prompt, output) and state (key, value), ILIKE."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, JsonValue

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.db.sql import escape_like

router = APIRouter(tags=["search"])
SNIPPET = 160


class SessionHit(BaseModel):
    butler: str
    id: str
    started_at: datetime
    status: str
    trigger_source: str
    snippet: str


class StateHit(BaseModel):
    butler: str
    key: str
    value: JsonValue
    updated_at: datetime


class SearchResults(BaseModel):
    query: str
    sessions: list[SessionHit]
    state: list[StateHit]


def snippet(text: str, query: str) -> str:
    at = text.lower().find(query.lower())
    if at < 0:
        return text[:SNIPPET]
    start = max(0, at - SNIPPET // 3)
    prefix = "…" if start else ""
    suffix = "…" if start + SNIPPET < len(text) else ""
    return prefix + text[start : start + SNIPPET] + suffix


@router.get("/api/search", response_model=ApiResponse[SearchResults])
async def search(
    dashboard: Ctx,
    q: Annotated[str, Query(min_length=2, max_length=200)],
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    """Case-insensitive substring search; up to `limit` hits of each kind, newest first."""
    pattern = f"%{escape_like(q)}%"
    sessions, state = await asyncio.gather(
        dashboard.db.fan_out(
            "SELECT session_id, created_at, status, trigger_source, "
            "CASE WHEN prompt ILIKE $1 ESCAPE '\\' THEN prompt ELSE coalesce(output, '') END "
            "AS text FROM sessions WHERE prompt ILIKE $1 ESCAPE '\\' "
            f"OR output ILIKE $1 ESCAPE '\\' ORDER BY created_at DESC LIMIT {limit}",
            pattern,
        ),
        dashboard.db.fan_out(
            "SELECT key, value, updated_at FROM state WHERE key ILIKE $1 ESCAPE '\\' "
            f"OR value::text ILIKE $1 ESCAPE '\\' ORDER BY updated_at DESC LIMIT {limit}",
            pattern,
        ),
    )
    session_hits = sorted(
        (
            SessionHit(
                butler=n,
                id=str(r["session_id"]),
                started_at=r["created_at"],
                status=r["status"],
                trigger_source=r["trigger_source"],
                snippet=snippet(r["text"], q),
            )
            for n, r in sessions.rows()
        ),
        key=lambda h: h.started_at,
        reverse=True,
    )[:limit]
    state_hits = sorted(
        (StateHit(butler=n, **dict(r)) for n, r in state.rows()),
        key=lambda h: h.updated_at,
        reverse=True,
    )[:limit]
    results = SearchResults(query=q, sessions=session_hits, state=state_hits)
    return ok(results, failed_butlers=sorted({*sessions.failed, *state.failed}))
