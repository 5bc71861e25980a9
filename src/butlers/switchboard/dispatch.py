"""Fan-out dispatch: every entry of a plan runs concurrently; a failure never stops
the others (abort policy `continue`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from butlers.switchboard.classification import RouteEntry

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
    # One id per entry, fixed before dispatch so a re-dispatch reuses them (the target
    # deduplicates its session by route id); fresh ones when empty.
    route_ids: tuple[uuid.UUID, ...] = ()

    def ids(self) -> tuple[uuid.UUID, ...]:
        if self.route_ids:
            if len(self.route_ids) != len(self.entries):
                raise ValueError("a fan-out plan needs one route id per entry")
            return self.route_ids
        return tuple(uuid.uuid4() for _ in self.entries)


@dataclass
class RouteOutcome:
    entry: RouteEntry
    status: RouteStatus
    duration_ms: int
    result: Any = None
    error: str | None = None
    route_id: uuid.UUID = field(default_factory=uuid.uuid4)


RouteOne = Callable[[RouteEntry, uuid.UUID], Awaitable[Any]]
OnOutcome = Callable[[RouteOutcome], Awaitable[None]]


async def execute_plan(
    plan: FanoutPlan, route_one: RouteOne, timeout: float, on_outcome: OnOutcome | None = None
) -> list[RouteOutcome]:
    """Run `route_one` for every entry at once, each bounded by `timeout` seconds;
    `on_outcome` (e.g. logging the route) runs as each one finishes."""

    async def run(entry: RouteEntry, route_id: uuid.UUID) -> RouteOutcome:
        result = await attempt(entry, route_id)
        if on_outcome is not None:
            await on_outcome(result)
        return result

    async def attempt(entry: RouteEntry, route_id: uuid.UUID) -> RouteOutcome:
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
        except Exception as exc:
            return outcome("error", error=f"{exc.__class__.__name__}: {exc}")
        return outcome("success", result=result)

    ids = plan.ids()
    return list(await asyncio.gather(*(run(e, i) for e, i in zip(plan.entries, ids, strict=True))))


def summarize(outcomes: list[RouteOutcome]) -> str:
    """`completed`, `partial` or `failed`, for the fan-out execution log."""
    successes = sum(o.status == "success" for o in outcomes)
    if successes == len(outcomes):
        return "completed"
    return "partial" if successes else "failed"
