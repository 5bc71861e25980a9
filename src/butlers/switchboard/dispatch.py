"""Fan-out dispatch: every entry of a plan runs concurrently; a failure never stops
the others (abort policy `continue`)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from butlers.switchboard.classification import RouteEntry

log = logging.getLogger(__name__)
RouteStatus = Literal["success", "error", "timeout", "target_unavailable"]


class TargetUnavailable(Exception):
    """The target butler could not be reached (not registered, down, refusing)."""


class RouteFailed(Exception):
    """The target answered, but its work failed; `result` is what it answered."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class FanoutPlan:
    request_id: uuid.UUID
    entries: tuple[RouteEntry, ...]
    abort_policy: Literal["continue"] = "continue"


@dataclass
class RouteOutcome:
    entry: RouteEntry
    status: RouteStatus
    duration_ms: int
    result: Any = None
    error: str | None = None
    route_id: uuid.UUID = field(default_factory=uuid.uuid4)


RouteOne = Callable[[RouteEntry, uuid.UUID], Awaitable[Any]]


async def execute_plan(plan: FanoutPlan, route_one: RouteOne, timeout: float) -> list[RouteOutcome]:
    """Run `route_one` for every entry at once, each bounded by `timeout` seconds."""

    async def run(entry: RouteEntry) -> RouteOutcome:
        route_id = uuid.uuid4()
        start = time.monotonic()

        def outcome(
            status: RouteStatus, result: Any = None, error: str | None = None
        ) -> RouteOutcome:
            elapsed = int((time.monotonic() - start) * 1000)
            return RouteOutcome(entry, status, elapsed, result, error, route_id)

        try:
            async with asyncio.timeout(timeout):
                result = await route_one(entry, route_id)
        except TimeoutError:
            return outcome("timeout", error=f"no answer from {entry.butler} within {timeout:g} s")
        except TargetUnavailable as exc:
            return outcome("target_unavailable", error=str(exc))
        except RouteFailed as exc:
            return outcome("error", result=exc.result, error=str(exc))
        except Exception as exc:  # a bug, not the target's failure: keep its traceback
            log.exception("route %s to %s failed unexpectedly", route_id, entry.butler)
            return outcome("error", error=f"{exc.__class__.__name__}: {exc}")
        return outcome("success", result=result)

    return list(await asyncio.gather(*(run(entry) for entry in plan.entries)))


def summarize(outcomes: list[RouteOutcome]) -> str:
    """`completed`, `partial` or `failed`, for the fan-out execution log."""
    successes = sum(o.status == "success" for o in outcomes)
    if successes == len(outcomes):
        return "completed"
    return "partial" if successes else "failed"
