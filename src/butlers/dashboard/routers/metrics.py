"""Metrics over time from the session logs: sessions, errors, cost and duration per
bucket, per butler or per model, for the dashboard's charts.

The range is one of a few (at most 90 buckets); the series are dense (a bucket without
sessions is zeros) and at most `MAX_SERIES` per answer, the rest summed as `(other)`.
A model with no known price says so (`priced: false`) and its sessions are counted as
unpriced, never as $0.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.pricing import price_for

router = APIRouter(tags=["metrics"])
Range = Literal["24h", "7d", "30d", "90d"]
GroupBy = Literal["butler", "model"]
# (bucket width, number of buckets) of each range.
RANGES: dict[str, tuple[timedelta, int]] = {
    "24h": (timedelta(hours=1), 24),
    "7d": (timedelta(hours=6), 28),
    "30d": (timedelta(days=1), 30),
    "90d": (timedelta(days=1), 90),
}
MAX_SERIES = 12
OTHER = "(other)"
UNKNOWN_MODEL = "(unknown)"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Buckets aligned on the epoch in UTC; errors are sessions that failed or were cut short
# by a restart; durations only of finished sessions.
SQL = (
    "SELECT date_bin($1::interval, created_at, $2::timestamptz) AS bucket, "
    f"coalesce(model, '{UNKNOWN_MODEL}') AS model, count(*) AS sessions, "
    "count(*) FILTER (WHERE status IN ('error', 'interrupted')) AS errors, "
    "count(*) FILTER (WHERE status <> 'running' AND cost_usd IS NULL) AS unpriced, "
    "coalesce(sum(cost_usd), 0) AS cost, "
    "coalesce(sum(duration_ms) FILTER (WHERE status <> 'running'), 0) AS duration_sum, "
    "count(duration_ms) FILTER (WHERE status <> 'running') AS duration_count, "
    "max(duration_ms) FILTER (WHERE status <> 'running') AS duration_max "
    "FROM sessions WHERE created_at >= $3 AND created_at < $4 GROUP BY bucket, model"
)


class MetricSeries(BaseModel):
    key: str  # the butler or the model
    # Whether the model has a known price (None when grouped by butler).
    priced: bool | None
    # One value per bucket, in the order of `buckets`.
    sessions: list[int]
    errors: list[int]
    cost_usd: list[float]
    unpriced_sessions: list[int]
    mean_duration_ms: list[float | None]  # None: no finished session in the bucket
    max_duration_ms: list[int | None]


class Metrics(BaseModel):
    range: Range
    by: GroupBy
    bucket_seconds: int
    since: datetime
    until: datetime
    buckets: list[datetime]  # each bucket's start, oldest first
    series: list[MetricSeries]


@dataclass
class _Acc:
    sessions: list[int]
    errors: list[int]
    cost: list[Decimal]
    unpriced: list[int]
    duration_sum: list[int]
    duration_count: list[int]
    duration_max: list[int | None] = field(default_factory=list)

    @classmethod
    def empty(cls, n: int) -> _Acc:
        return cls([0] * n, [0] * n, [Decimal(0)] * n, [0] * n, [0] * n, [0] * n, [None] * n)

    def add(self, i: int, row: Any) -> None:
        self.sessions[i] += row["sessions"]
        self.errors[i] += row["errors"]
        self.cost[i] += row["cost"]
        self.unpriced[i] += row["unpriced"]
        self.duration_sum[i] += int(row["duration_sum"])
        self.duration_count[i] += row["duration_count"]
        longest = row["duration_max"]
        if longest is not None:
            current = self.duration_max[i]
            self.duration_max[i] = longest if current is None else max(current, longest)

    def merge(self, other: _Acc) -> None:
        for i in range(len(self.sessions)):
            self.add(
                i,
                {
                    "sessions": other.sessions[i],
                    "errors": other.errors[i],
                    "cost": other.cost[i],
                    "unpriced": other.unpriced[i],
                    "duration_sum": other.duration_sum[i],
                    "duration_count": other.duration_count[i],
                    "duration_max": other.duration_max[i],
                },
            )

    def series(self, key: str, priced: bool | None) -> MetricSeries:
        return MetricSeries(
            key=key,
            priced=priced,
            sessions=self.sessions,
            errors=self.errors,
            cost_usd=[round(float(c), 6) for c in self.cost],
            unpriced_sessions=self.unpriced,
            mean_duration_ms=[
                round(s / n, 1) if n else None
                for s, n in zip(self.duration_sum, self.duration_count, strict=True)
            ],
            max_duration_ms=self.duration_max,
        )


def buckets_of(range_: str, now: datetime) -> list[datetime]:
    """The starts of a range's buckets, the last one holding `now`."""
    width, count = RANGES[range_]
    last = EPOCH + width * ((now - EPOCH) // width)
    return [last - width * (count - 1 - i) for i in range(count)]


@router.get("/api/metrics", response_model=ApiResponse[Metrics])
async def metrics(
    dashboard: Ctx,
    range_: Annotated[Range, Query(alias="range")] = "7d",
    by: GroupBy = "butler",
) -> dict[str, Any]:
    """Sessions, errors, cost and session duration per time bucket, one series per
    butler or per model."""
    width, _ = RANGES[range_]
    starts = buckets_of(range_, datetime.now(UTC))
    index = {start: i for i, start in enumerate(starts)}
    since, until = starts[0], starts[-1] + width
    fan = await dashboard.db.fan_out(SQL, width, EPOCH, since, until)
    groups: dict[str, _Acc] = defaultdict(lambda: _Acc.empty(len(starts)))
    for name, row in fan.rows():
        i = index.get(row["bucket"])
        if i is not None:
            groups[name if by == "butler" else row["model"]].add(i, row)
    kept = sorted(groups.items(), key=lambda kv: (-sum(kv[1].sessions), kv[0]))
    if len(kept) > MAX_SERIES:
        other = _Acc.empty(len(starts))
        for _, acc in kept[MAX_SERIES - 1 :]:
            other.merge(acc)
        kept = [*kept[: MAX_SERIES - 1], (OTHER, other)]
    series = [
        acc.series(
            key,
            None if by == "butler" or key == OTHER else price_for(key) is not None,
        )
        for key, acc in sorted(kept, key=lambda kv: kv[0])
    ]
    answer = Metrics(
        range=range_,
        by=by,
        bucket_seconds=int(width.total_seconds()),
        since=since,
        until=until,
        buckets=starts,
        series=series,
    )
    return ok(answer, failed_butlers=fan.failed_butlers)
