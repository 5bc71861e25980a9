"""Fan-out: concurrency, per-target status, abort policy `continue`."""

from __future__ import annotations

import asyncio
import time
import uuid

from butlers.switchboard.classification import RouteEntry
from butlers.switchboard.dispatch import FanoutPlan, TargetUnavailable, execute_plan, summarize


def _plan(*butlers: str) -> FanoutPlan:
    return FanoutPlan(uuid.uuid4(), tuple(RouteEntry(b, f"p-{b}", f"s-{b}") for b in butlers))


async def test_targets_run_concurrently() -> None:
    async def route(entry: RouteEntry, _id: uuid.UUID) -> str:
        await asyncio.sleep(0.2)
        return entry.butler

    start = time.monotonic()
    outcomes = await execute_plan(_plan("a", "b", "c"), route, timeout=5)
    assert time.monotonic() - start < 0.5
    assert [o.result for o in outcomes] == ["a", "b", "c"]
    assert summarize(outcomes) == "completed"


async def test_one_failure_does_not_stop_the_others() -> None:
    async def route(entry: RouteEntry, _id: uuid.UUID) -> str:
        if entry.butler == "down":
            raise TargetUnavailable("down is not reachable")
        if entry.butler == "broken":
            raise RuntimeError("boom")
        if entry.butler == "slow":
            await asyncio.sleep(5)
        return "ok"

    outcomes = await execute_plan(_plan("ok", "down", "broken", "slow"), route, timeout=0.2)
    assert [o.status for o in outcomes] == ["success", "target_unavailable", "error", "timeout"]
    assert outcomes[2].error == "RuntimeError: boom"
    assert summarize(outcomes) == "partial"
    assert all(o.duration_ms >= 0 for o in outcomes)
