"""A dashboard asked right after it starts answers with every butler's probed status:
what `butlers up` said ("ready") and what the dashboard shows agree, never `unknown`."""

from __future__ import annotations

import asyncio

import httpx2 as httpx
import pytest

from butlers.dashboard.monitor import ButlerMonitor

from ..harness.ecosystem import EcosystemHandle
from .conftest import extra_dashboard


async def test_the_first_listing_waits_for_every_butlers_first_probe(
    butler_ecosystem: EcosystemHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = ButlerMonitor._probe

    async def slow_probe(self: ButlerMonitor, butler: object) -> None:
        await asyncio.sleep(1.0)  # a loaded machine: the first round takes a while
        await probe(self, butler)  # type: ignore[arg-type]

    monkeypatch.setattr(ButlerMonitor, "_probe", slow_probe)
    async with (
        extra_dashboard(butler_ecosystem, login=False) as (url, app),
        httpx.AsyncClient(base_url=url, timeout=30) as dashboard,
    ):
        assert app.state.dashboard.monitor.rounds == 0, "asked before the first probe ended"
        listed = (await dashboard.get("/api/butlers")).json()["data"]
        assert {b["name"] for b in listed} == set(butler_ecosystem.names)
        unknown = [b["name"] for b in listed if b["status"] == "unknown"]
        assert unknown == [], f"listed before their first probe: {unknown}"
