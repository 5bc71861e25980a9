"""The metrics behind the charts equal the seeded sessions, bucket by bucket; an unpriced
model says so; ranges are bounded."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions


def _series(answer: dict[str, Any], key: str) -> dict[str, Any]:
    found = [s for s in answer["series"] if s["key"] == key]
    assert len(found) == 1, [s["key"] for s in answer["series"]]
    return found[0]


def _bucket_of(answer: dict[str, Any], at: datetime) -> int:
    starts = [datetime.fromisoformat(b) for b in answer["buckets"]]
    width = timedelta(seconds=answer["bucket_seconds"])
    (index,) = [i for i, start in enumerate(starts) if start <= at < start + width]
    return index


async def test_metrics_per_model_and_butler_equal_the_seeded_sessions(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    tag = uuid.uuid4().hex[:8]
    priced, unpriced = f"gpt-4o-metrics-{tag}", f"mystery-metrics-{tag}"
    now = datetime.now(UTC)
    two_hours_ago, half_an_hour_ago = now - timedelta(hours=2), now - timedelta(minutes=30)
    await seed_sessions(
        butler_ecosystem,
        "general",
        [
            {"created_at": two_hours_ago, "model": priced, "cost_usd": 0.01, "duration_ms": 1000},
            {
                "created_at": two_hours_ago,
                "model": priced,
                "status": "error",
                "error": "boom",
                "duration_ms": 3000,
            },
            {"created_at": two_hours_ago, "model": unpriced, "duration_ms": 500},
            {"created_at": half_an_hour_ago, "model": unpriced, "duration_ms": 1500},
            # Out of the 24 h range.
            {"created_at": now - timedelta(hours=25), "model": priced, "cost_usd": 5},
        ],
    )
    await seed_sessions(
        butler_ecosystem,
        "health",
        [{"created_at": half_an_hour_ago, "model": priced, "cost_usd": 0.02, "duration_ms": 2000}],
    )
    response = await dashboard.get("/api/metrics", params={"range": "24h", "by": "model"})
    assert response.status_code == 200, response.text
    answer = response.json()["data"]
    assert (answer["range"], answer["by"], answer["bucket_seconds"]) == ("24h", "model", 3600)
    assert len(answer["buckets"]) == 24
    assert datetime.fromisoformat(answer["until"]) > now
    early, late = _bucket_of(answer, two_hours_ago), _bucket_of(answer, half_an_hour_ago)

    model = _series(answer, priced)
    assert model["priced"] is True
    assert (sum(model["sessions"]), sum(model["errors"])) == (3, 1)
    assert model["sessions"][early] == 2 and model["sessions"][late] == 1
    assert round(sum(model["cost_usd"]), 6) == 0.03
    # The errored session has no cost: it is unpriced, never $0.
    assert sum(model["unpriced_sessions"]) == 1
    assert model["mean_duration_ms"][early] == 2000 and model["max_duration_ms"][early] == 3000
    assert model["mean_duration_ms"][late] == 2000
    assert {model["mean_duration_ms"][i] for i in range(24) if i not in (early, late)} == {None}

    mystery = _series(answer, unpriced)
    assert mystery["priced"] is False
    assert sum(mystery["unpriced_sessions"]) == sum(mystery["sessions"]) == 2
    assert sum(mystery["cost_usd"]) == 0

    per_butler = (await dashboard.get("/api/metrics", params={"range": "24h"})).json()["data"]
    assert per_butler["by"] == "butler"
    general, health = _series(per_butler, "general"), _series(per_butler, "health")
    assert general["priced"] is None
    assert general["sessions"][early] >= 3 and health["sessions"][late] >= 1
    assert general["errors"][early] >= 1

    week = (await dashboard.get("/api/metrics", params={"range": "7d"})).json()["data"]
    assert (week["bucket_seconds"], len(week["buckets"])) == (6 * 3600, 28)
    assert sum(_series(week, "general")["sessions"]) >= 5  # the 25 h old one too


async def test_metrics_refuse_an_unbounded_range(dashboard: httpx.AsyncClient) -> None:
    for params in ({"range": "1y"}, {"range": "all"}, {"by": "trigger"}):
        response = await dashboard.get("/api/metrics", params=params)
        assert response.status_code == 400, (params, response.text)
        error = response.json()["error"]
        assert error["code"] == "VALIDATION_ERROR" and error["details"]["errors"], error
