"""Fifty Butlers at once: all provisioned, and a resync of them unchanged writes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .conftest import BUTLERS, NAMESPACE, Cluster, butlers_path, eventually, running_operator

COUNT = 50
WRITES = {"POST", "PUT", "PATCH", "DELETE"}


def _method(request: Any) -> str:
    return str(getattr(request.method, "value", request.method)).upper()


def _database_ready(kmock: Any, name: str) -> bool:
    try:
        butler = kmock.objects[BUTLERS, NAMESPACE, name]
    except KeyError:
        return False
    conditions = (butler.get("status") or {}).get("conditions") or []
    return any(c["type"] == "DatabaseReady" and c["status"] == "True" for c in conditions)


# The emulator's request log is read directly (its filtered views would scan all of it
# for every request: see VersionedEmulator.recent_only).
@pytest.mark.kmock(recent_only=True)
async def test_a_resync_of_fifty_unchanged_butlers_writes_nothing(
    cluster: Cluster, make_settings: Any, kmock: Any
) -> None:
    names = [f"b{i}" for i in range(COUNT)]
    listing = butlers_path()

    def resync_lists(after: int) -> list[int]:
        return [
            i
            for i, r in enumerate(kmock._requests)
            if i > after and _method(r) == "GET" and str(r.url.path) == listing
        ]

    async with running_operator(make_settings(resync_seconds=1.0)):
        await asyncio.gather(
            *(cluster.create_butler(n, port=42000 + i) for i, n in enumerate(names))
        )
        await eventually(
            lambda: all(_database_ready(kmock, n) for n in names), f"{COUNT} Butlers", 60
        )
        # One whole resync: from one of its lists to the next one's.
        start = len(kmock._requests)
        first = (await eventually(lambda: resync_lists(start), "a resync"))[0]
        second = (await eventually(lambda: resync_lists(first), "the next resync"))[0]
    during = kmock._requests[first:second]
    writes = [f"{_method(r)} {r.url.path}" for r in during if _method(r) in WRITES]
    assert writes == []
    # It did look at every Butler (and its Deployment).
    read = {str(r.url.path) for r in during if _method(r) == "GET"}
    assert {f"{listing}/{n}" for n in names} <= read
