"""Costs from the session logs: summary, daily series, top sessions, per schedule.

Each finished session carries the cost its butler computed from the price table.
A session without one (a model with no known price, or no token counts) is
counted as *unpriced*, never as $0: totals say how many sessions they miss.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import ValidationFailed
from butlers.pricing import cache_savings_usd, price_for

router = APIRouter(tags=["costs"])
Period = Literal["24h", "7d", "30d", "90d", "all"]
PERIODS = {"24h": 1, "7d": 7, "30d": 30, "90d": 90}
FINISHED = "status <> 'running' AND created_at >= $1 AND created_at < $2"


class Price(BaseModel):
    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None  # None: cached input is billed as input
    cache_write_per_mtok: float | None


class CostBreakdown(BaseModel):
    key: str
    cost_usd: float
    sessions: int
    unpriced_sessions: int
    input_tokens: int
    output_tokens: int
    # Of the input, read from / written to the provider's prompt cache.
    cached_tokens: int
    cache_write_tokens: int


class ModelCost(CostBreakdown):
    # What reading from the cache saved against sending that input uncached
    # (None: no known price for this model).
    cache_savings_usd: float | None
    price: Price | None  # None: no known price for this model


class CostSummary(BaseModel):
    since: datetime | None
    until: datetime
    total_cost_usd: float
    sessions: int
    unpriced_sessions: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    cache_savings_usd: float
    by_butler: list[CostBreakdown]
    by_model: list[ModelCost]


class DailyCost(BaseModel):
    date: date
    cost_usd: float
    sessions: int
    unpriced_sessions: int
    by_butler: dict[str, float]


class TopSession(BaseModel):
    butler: str
    id: str
    started_at: datetime
    trigger_source: str
    model: str | None
    cost_usd: float
    input_tokens: int | None
    output_tokens: int | None
    trace_id: str | None


class ScheduleCost(BaseModel):
    butler: str
    schedule: str
    sessions: int
    unpriced_sessions: int
    cost_usd: float
    average_cost_usd: float | None
    last_run_at: datetime | None


def window(
    period: Period, since: datetime | None, until: datetime | None
) -> tuple[datetime | None, datetime]:
    end = until or datetime.now(UTC)
    if since is not None:
        start: datetime | None = since
    elif period == "all":
        start = None
    else:
        start = end - timedelta(days=PERIODS[period])
    if start is not None and start >= end:
        raise ValidationFailed("since must be before until")
    return start, end


def usd(value: Decimal | float | None) -> float:
    return round(float(value or 0), 6)


async def _fan(dashboard: Dashboard, sql: str, start: datetime | None, end: datetime) -> Any:
    return await dashboard.db.fan_out(sql, start or datetime.min.replace(tzinfo=UTC), end)


PeriodQuery = Annotated[Period, Query(description="Ignored when `since` is given.")]


@router.get("/api/costs/summary", response_model=ApiResponse[CostSummary])
async def cost_summary(
    dashboard: Ctx,
    period: PeriodQuery = "30d",
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    start, end = window(period, since, until)
    fan = await _fan(
        dashboard,
        "SELECT model, count(*) AS sessions, count(cost_usd) AS priced, sum(cost_usd) AS cost, "
        "coalesce(sum(input_tokens), 0) AS input_tokens, "
        "coalesce(sum(output_tokens), 0) AS output_tokens, "
        "coalesce(sum(cached_tokens), 0) AS cached_tokens, "
        "coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens "
        f"FROM sessions WHERE {FINISHED} GROUP BY model",
        start,
        end,
    )
    by_butler: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(Decimal))
    by_model: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(Decimal))
    for name, row in fan.rows():
        for bucket in (by_butler[name], by_model[row["model"] or "(unknown)"]):
            bucket["cost"] += row["cost"] or 0
            bucket["sessions"] += row["sessions"]
            bucket["unpriced"] += row["sessions"] - row["priced"]
            bucket["input"] += row["input_tokens"]
            bucket["output"] += row["output_tokens"]
            bucket["cached"] += row["cached_tokens"]
            bucket["written"] += row["cache_write_tokens"]

    def breakdown(key: str, b: dict[str, Any]) -> dict[str, Any]:
        return {
            "key": key,
            "cost_usd": usd(b["cost"]),
            "sessions": int(b["sessions"]),
            "unpriced_sessions": int(b["unpriced"]),
            "input_tokens": int(b["input"]),
            "output_tokens": int(b["output"]),
            "cached_tokens": int(b["cached"]),
            "cache_write_tokens": int(b["written"]),
        }

    models = []
    for key, bucket in sorted(by_model.items()):
        price = price_for(key)
        models.append(
            ModelCost(
                **breakdown(key, bucket),
                price=Price(
                    input_per_mtok=price.input_per_mtok,
                    output_per_mtok=price.output_per_mtok,
                    cache_read_per_mtok=price.cache_read_per_mtok,
                    cache_write_per_mtok=price.cache_write_per_mtok,
                )
                if price
                else None,
                cache_savings_usd=cache_savings_usd(key, int(bucket["cached"])),
            )
        )
    butlers = [CostBreakdown(**breakdown(k, b)) for k, b in sorted(by_butler.items())]
    summary = CostSummary(
        since=start,
        until=end,
        total_cost_usd=usd(sum((b["cost"] for b in by_butler.values()), Decimal(0))),
        sessions=sum(b.sessions for b in butlers),
        unpriced_sessions=sum(b.unpriced_sessions for b in butlers),
        input_tokens=sum(b.input_tokens for b in butlers),
        output_tokens=sum(b.output_tokens for b in butlers),
        cached_tokens=sum(b.cached_tokens for b in butlers),
        cache_write_tokens=sum(b.cache_write_tokens for b in butlers),
        cache_savings_usd=usd(sum(m.cache_savings_usd or 0 for m in models)),
        by_butler=butlers,
        by_model=models,
    )
    return ok(summary, failed_butlers=fan.failed_butlers)


@router.get("/api/costs/daily", response_model=ApiResponse[list[DailyCost]])
async def daily_costs(
    dashboard: Ctx, days: Annotated[int, Query(ge=1, le=366)] = 30
) -> dict[str, Any]:
    """One entry per UTC day (oldest first, days without sessions included)."""
    end = datetime.now(UTC)
    first = (end - timedelta(days=days - 1)).date()
    start = datetime.combine(first, datetime.min.time(), UTC)
    fan = await _fan(
        dashboard,
        "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS sessions, "
        f"count(cost_usd) AS priced, sum(cost_usd) AS cost FROM sessions WHERE {FINISHED} "
        "GROUP BY day",
        start,
        end,
    )
    series = {
        first + timedelta(days=i): DailyCost(
            date=first + timedelta(days=i),
            cost_usd=0,
            sessions=0,
            unpriced_sessions=0,
            by_butler={},
        )
        for i in range(days)
    }
    for name, row in fan.rows():
        entry = series.get(row["day"])
        if entry is None:
            continue
        entry.cost_usd = usd(Decimal(str(entry.cost_usd)) + (row["cost"] or 0))
        entry.sessions += row["sessions"]
        entry.unpriced_sessions += row["sessions"] - row["priced"]
        entry.by_butler[name] = usd(row["cost"])
    return ok(list(series.values()), failed_butlers=fan.failed_butlers)


@router.get("/api/costs/top-sessions", response_model=ApiResponse[list[TopSession]])
async def top_sessions(
    dashboard: Ctx,
    period: PeriodQuery = "30d",
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> dict[str, Any]:
    """The most expensive priced sessions of the period."""
    start, end = window(period, since, until)
    fan = await _fan(
        dashboard,
        "SELECT session_id, created_at, trigger_source, model, cost_usd, input_tokens, "
        f"output_tokens, trace_id FROM sessions WHERE {FINISHED} AND cost_usd IS NOT NULL "
        f"ORDER BY cost_usd DESC, created_at DESC LIMIT {limit}",
        start,
        end,
    )
    items = [
        TopSession(
            butler=name,
            id=str(row["session_id"]),
            started_at=row["created_at"],
            trigger_source=row["trigger_source"],
            model=row["model"],
            cost_usd=usd(row["cost_usd"]),
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            trace_id=row["trace_id"],
        )
        for name, row in fan.rows()
    ]
    items.sort(key=lambda s: (s.cost_usd, s.started_at), reverse=True)
    return ok(items[:limit], failed_butlers=fan.failed_butlers)


@router.get("/api/costs/by-schedule", response_model=ApiResponse[list[ScheduleCost]])
async def costs_by_schedule(
    dashboard: Ctx,
    period: PeriodQuery = "30d",
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """Sessions started by each schedule (`trigger_source` `schedule:<name>`) and their cost."""
    start, end = window(period, since, until)
    fan = await _fan(
        dashboard,
        "SELECT substr(trigger_source, 10) AS schedule, count(*) AS sessions, "
        "count(cost_usd) AS priced, sum(cost_usd) AS cost, max(created_at) AS last_run_at "
        f"FROM sessions WHERE {FINISHED} AND trigger_source LIKE 'schedule:%' GROUP BY schedule",
        start,
        end,
    )
    items = []
    for name, row in fan.rows():
        priced = row["priced"]
        items.append(
            ScheduleCost(
                butler=name,
                schedule=row["schedule"],
                sessions=row["sessions"],
                unpriced_sessions=row["sessions"] - priced,
                cost_usd=usd(row["cost"]),
                average_cost_usd=usd(row["cost"] / priced) if priced else None,
                last_run_at=row["last_run_at"],
            )
        )
    items.sort(key=lambda s: (-s.cost_usd, s.butler, s.schedule))
    return ok(items, failed_butlers=fan.failed_butlers)
