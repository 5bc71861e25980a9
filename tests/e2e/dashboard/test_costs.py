"""Costs equal the sums of the seeded sessions; unpriced sessions are counted, never $0."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions

WINDOW_START = datetime(2019, 6, 1, tzinfo=UTC)


async def test_summary_top_sessions_and_schedules_equal_seeded_sums(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    start = WINDOW_START + timedelta(days=uuid.uuid4().int % 1000)  # a window of our own
    seeded = {
        "general": [
            ("gpt-4o", 0.012345, 1000, 200, "schedule:nightly"),
            ("gpt-4o", 0.5, 20000, 1000, "trigger"),
            ("mystery-model", None, 50, 5, "trigger"),
        ],
        "health": [
            ("claude-haiku-4-5", 0.000777, 300, 20, "schedule:nightly"),
            ("gpt-4o", 0.25, 1, 1, "schedule:weekly"),
        ],
        "messenger": [("scripted", None, None, None, "trigger")],
    }
    for butler, rows in seeded.items():
        await seed_sessions(
            butler_ecosystem,
            butler,
            [
                {
                    "created_at": start + timedelta(minutes=i),
                    "model": model,
                    "cost_usd": cost,
                    "input_tokens": tin,
                    "output_tokens": tout,
                    "trigger_source": source,
                    # Half of the large gpt-4o session's input came from the prompt cache.
                    "cached_tokens": tin // 2 if cost == 0.5 else None,
                }
                for i, (model, cost, tin, tout, source) in enumerate(rows)
            ],
        )
    window = {"since": start.isoformat(), "until": (start + timedelta(hours=1)).isoformat()}
    summary = (await dashboard.get("/api/costs/summary", params=window)).json()["data"]
    every = [row for rows in seeded.values() for row in rows]
    total = sum((Decimal(str(r[1])) for r in every if r[1] is not None), Decimal(0))
    assert summary["total_cost_usd"] == float(total) == 0.763122
    assert (summary["sessions"], summary["unpriced_sessions"]) == (6, 2)
    assert summary["input_tokens"] == sum(r[2] or 0 for r in every)
    by_butler = {b["key"]: b for b in summary["by_butler"]}
    assert by_butler["general"]["cost_usd"] == 0.512345
    assert by_butler["general"]["unpriced_sessions"] == 1
    assert by_butler["messenger"] == {
        "key": "messenger",
        "cost_usd": 0.0,
        "sessions": 1,
        "unpriced_sessions": 1,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
    }
    by_model = {m["key"]: m for m in summary["by_model"]}
    assert by_model["gpt-4o"]["cost_usd"] == 0.762345
    assert by_model["gpt-4o"]["price"] == {
        "input_per_mtok": 2.5,
        "output_per_mtok": 10.0,
        "cache_read_per_mtok": 1.25,
        "cache_write_per_mtok": None,
    }
    # 10,000 cached tokens at 1.25 instead of 2.5 per million.
    assert by_model["gpt-4o"]["cached_tokens"] == summary["cached_tokens"] == 10_000
    assert by_model["gpt-4o"]["cache_savings_usd"] == summary["cache_savings_usd"] == 0.0125
    assert by_model["mystery-model"]["price"] is None
    assert by_model["mystery-model"]["unpriced_sessions"] == 1

    top = (await dashboard.get("/api/costs/top-sessions", params={**window, "limit": 3})).json()
    assert [(s["butler"], s["cost_usd"]) for s in top["data"]] == [
        ("general", 0.5),
        ("health", 0.25),
        ("general", 0.012345),
    ]
    schedules = (await dashboard.get("/api/costs/by-schedule", params=window)).json()["data"]
    assert [(s["butler"], s["schedule"], s["cost_usd"], s["sessions"]) for s in schedules] == [
        ("health", "weekly", 0.25, 1),
        ("general", "nightly", 0.012345, 1),
        ("health", "nightly", 0.000777, 1),
    ]


async def test_daily_costs_put_each_day_under_its_date(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    day = (datetime.now(UTC) - timedelta(days=3)).replace(hour=12, minute=0, second=0)
    before = (await dashboard.get("/api/costs/daily", params={"days": 7})).json()["data"]
    await seed_sessions(
        butler_ecosystem,
        "relationship",
        [{"created_at": day, "cost_usd": 0.125}, {"created_at": day, "cost_usd": None}],
    )
    after = (await dashboard.get("/api/costs/daily", params={"days": 7})).json()["data"]
    assert len(after) == 7 and after[-1]["date"] == datetime.now(UTC).date().isoformat()
    [then] = [d for d in before if d["date"] == day.date().isoformat()]
    [now] = [d for d in after if d["date"] == day.date().isoformat()]
    assert round(now["cost_usd"] - then["cost_usd"], 6) == 0.125
    assert now["sessions"] - then["sessions"] == 2
    assert now["unpriced_sessions"] - then["unpriced_sessions"] == 1
    assert (
        round(now["by_butler"]["relationship"] - then["by_butler"].get("relationship", 0), 6)
        == 0.125
    )
