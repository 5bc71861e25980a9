"""In a cluster the dashboard finds butlers from Butler resources: one applied while it
runs is listed (with its Kubernetes status) without a restart, and one deleted goes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2 as httpx
import pytest

from butlers.roster import load_butler_file

from ..conftest import ROOT
from ..harness.ecosystem import EcosystemHandle

DEADLINE = 15.0
NAME = "newcomer"


def _newcomer() -> dict[str, Any]:
    """The roster's general butler under another name and port, on an image no node can
    run: the dashboard must list it from its resource alone (its pod never registers)."""
    manifest = load_butler_file(ROOT / "roster" / "general.yaml").to_manifest()
    manifest["metadata"] = {"name": NAME}
    manifest["spec"] |= {"port": 40190, "image": "registry.invalid/butlers/none:0", "schedules": []}
    return manifest


async def _listed(dashboard: httpx.AsyncClient) -> dict[str, Any]:
    response = await dashboard.get("/api/butlers")
    assert response.status_code == 200, response.text
    return {b["name"]: b for b in response.json()["data"]}


async def _until(dashboard: httpx.AsyncClient, present: bool) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while True:
        butlers = await _listed(dashboard)
        if (NAME in butlers) == present:
            return butlers
        assert time.monotonic() < deadline, f"{NAME} present={not present} after {DEADLINE} s"
        await asyncio.sleep(0.2)


async def test_a_butler_applied_later_is_listed_without_a_restart(
    dashboard: httpx.AsyncClient, butler_ecosystem: EcosystemHandle
) -> None:
    if butler_ecosystem.apply_butler is None or butler_ecosystem.delete_butler is None:
        pytest.skip(f"the {butler_ecosystem.backend} backend has no Butler resources")
    before = await _listed(dashboard)
    assert NAME not in before and set(butler_ecosystem.names) <= set(before)
    await butler_ecosystem.apply_butler(_newcomer())
    try:
        butlers = await _until(dashboard, present=True)
        # Its Service URL and Kubernetes status come from the resource itself.
        assert butlers[NAME]["url"].endswith(":40190/mcp")
        assert (
            butlers[NAME]["kube"]["namespace"]
            == butlers[butler_ecosystem.names[0]]["kube"]["namespace"]
        )
    finally:
        await butler_ecosystem.delete_butler(NAME)
    butlers = await _until(dashboard, present=False)
    assert set(butlers) == set(before)
