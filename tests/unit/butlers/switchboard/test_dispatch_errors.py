"""A route that fails by a bug is an `error` outcome, and its traceback is logged."""

from __future__ import annotations

import logging
import uuid

import pytest

from butlers.switchboard.classification import RouteEntry
from butlers.switchboard.dispatch import FanoutPlan, RouteFailed, TriggerAnswer, execute_plan


async def test_a_bug_in_a_route_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def route_one(entry: RouteEntry, route_id: uuid.UUID) -> TriggerAnswer:
        if entry.butler == "health":
            raise AttributeError("'NoneType' object has no attribute 'data'")
        raise RouteFailed("general: the model failed")

    plan = FanoutPlan(
        uuid.uuid4(), (RouteEntry("health", "log 80kg", "80kg"), RouteEntry("general", "x", "x"))
    )
    with caplog.at_level(logging.INFO):
        health, general = await execute_plan(plan, route_one, timeout=5)
    assert (health.status, general.status) == ("error", "error")
    assert health.error == "AttributeError: 'NoneType' object has no attribute 'data'"
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1, "only the bug is logged as an error, not the target's failure"
    assert logged[0].exc_info is not None and logged[0].exc_info[0] is AttributeError
    assert "health" in logged[0].getMessage()
