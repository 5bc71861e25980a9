"""The timeline merges every butler's events newest first and pages with a cursor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx2 as httpx

from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions


async def test_the_newest_events_come_first_and_the_cursor_continues(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    future = datetime.now(UTC) + timedelta(days=400)  # above anything else in this session
    ids = {}
    for offset, butler in ((3, "general"), (2, "health"), (1, "general")):
        [ids[offset]] = await seed_sessions(
            butler_ecosystem,
            butler,
            [
                {
                    "created_at": future + timedelta(seconds=offset),
                    "completed_at": None,
                    "status": "running",
                }
            ],
        )
    first = (await dashboard.get("/api/timeline", params={"limit": 2})).json()
    assert [(e["kind"], e["ref"]) for e in first["data"]] == [
        ("session_start", ids[3]),
        ("session_start", ids[2]),
    ]
    assert [e["butler"] for e in first["data"]] == ["general", "health"]
    cursor = first["meta"]["next_cursor"]
    second = (await dashboard.get("/api/timeline", params={"limit": 2, "cursor": cursor})).json()
    assert second["data"][0]["ref"] == ids[1] and second["meta"]["offset"] == 2
    only = (
        await dashboard.get(
            "/api/timeline", params={"limit": 1, "butler": "health", "kind": "session_start"}
        )
    ).json()
    assert only["data"][0]["ref"] == ids[2]
