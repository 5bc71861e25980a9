"""The overview: totals and one card per butler (status, activity, cost, approvals,
next schedule, heartbeat), in three concurrent fan-outs."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.connectors import ConnectorHealth, connector_health
from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.views import ButlerSummary, summary
from butlers.modules.approvals import store as approvals_store
from butlers.modules.switchboard import store as switchboard

router = APIRouter(tags=["butlers"])
STATS = (
    "SELECT count(*) AS sessions, count(*) FILTER (WHERE status = 'error') AS errors, "
    "count(*) FILTER (WHERE status = 'running') AS running, sum(cost_usd) AS cost, "
    "count(*) FILTER (WHERE cost_usd IS NULL AND status <> 'running') AS unpriced, "
    "(SELECT max(created_at) FROM sessions) AS last_session_at, "
    "(SELECT name FROM scheduled_tasks WHERE enabled AND next_due_at IS NOT NULL "
    " ORDER BY next_due_at LIMIT 1) AS next_schedule, "
    "(SELECT min(next_due_at) FROM scheduled_tasks WHERE enabled) AS next_due_at "
    "FROM sessions WHERE created_at >= now() - interval '24 hours'"
)


class NextSchedule(BaseModel):
    name: str
    due_at: datetime


class ButlerCard(ButlerSummary):
    sessions_24h: int | None
    errors_24h: int | None
    running_sessions: int | None
    cost_24h_usd: float | None
    unpriced_sessions_24h: int | None
    last_session_at: datetime | None
    pending_approvals: int | None  # None: the butler has no approvals module
    next_schedule: NextSchedule | None
    heartbeat_at: datetime | None  # last heartbeat the switchboard saw


class Totals(BaseModel):
    butlers: int
    ok: int
    degraded: int
    down: int
    sessions_24h: int
    errors_24h: int
    running_sessions: int
    cost_24h_usd: float
    unpriced_sessions_24h: int
    pending_approvals: int


class Overview(BaseModel):
    totals: Totals
    butlers: list[ButlerCard]
    connectors: list[ConnectorHealth]  # inbound channel connectors and their health


@router.get("/api/overview", response_model=ApiResponse[Overview])
async def overview(dashboard: Ctx) -> dict[str, Any]:
    await dashboard.monitor.settled()
    butlers = dashboard.butlers()
    stats, approvals, registry, connectors = await asyncio.gather(
        dashboard.db.fan_out(STATS),
        dashboard.db.fan_read(approvals_store.pending_count, dashboard.with_module("approvals")),
        dashboard.db.fan_read(switchboard.heartbeats, dashboard.with_module("switchboard")),
        connector_health(dashboard),
    )
    heartbeats = {beat.name: beat.last_seen_at for _n, beat in registry.rows()}
    cards = []
    for name in sorted(butlers):
        rows = stats.results.get(name) or [None]
        row = rows[0]
        pending = approvals.results.get(name)
        cost = row["cost"] if row else None
        cards.append(
            ButlerCard(
                **summary(dashboard, butlers[name]).model_dump(),
                sessions_24h=row["sessions"] if row else None,
                errors_24h=row["errors"] if row else None,
                running_sessions=row["running"] if row else None,
                cost_24h_usd=round(float(cost), 6) if cost is not None else (0.0 if row else None),
                unpriced_sessions_24h=row["unpriced"] if row else None,
                last_session_at=row["last_session_at"] if row else None,
                pending_approvals=pending,
                next_schedule=NextSchedule(name=row["next_schedule"], due_at=row["next_due_at"])
                if row and row["next_schedule"]
                else None,
                heartbeat_at=heartbeats.get(name),
            )
        )
    totals = Totals(
        butlers=len(cards),
        ok=sum(c.status == "ok" for c in cards),
        degraded=sum(c.status == "degraded" for c in cards),
        down=sum(c.status == "down" for c in cards),
        sessions_24h=sum(c.sessions_24h or 0 for c in cards),
        errors_24h=sum(c.errors_24h or 0 for c in cards),
        running_sessions=sum(c.running_sessions or 0 for c in cards),
        cost_24h_usd=round(sum(c.cost_24h_usd or 0 for c in cards), 6),
        unpriced_sessions_24h=sum(c.unpriced_sessions_24h or 0 for c in cards),
        pending_approvals=sum(c.pending_approvals or 0 for c in cards),
    )
    failed = sorted(
        {*stats.failed, *approvals.failed, *registry.failed, *connectors.failed_butlers}
    )
    overview = Overview(totals=totals, butlers=cards, connectors=connectors.connectors)
    return ok(overview, failed_butlers=failed)
