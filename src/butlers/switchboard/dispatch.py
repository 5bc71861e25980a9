"""Fan-out dispatch: every entry of a plan runs concurrently; a failure never stops
the others (abort policy `continue`)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from butlers.switchboard.classification import RouteEntry

log = logging.getLogger(__name__)
RouteStatus = Literal["success", "error", "timeout", "target_unavailable"]


class TargetUnavailable(Exception):
    """The target butler could not be reached (not registered, down, refusing)."""


@dataclass(frozen=True)
class TriggerAnswer:
    """What a target's `trigger` answered (its SpawnerResult), as far as routing reads it."""

    success: bool
    session_id: str | None = None
    output: str | None = None
    error: str | None = None
    tool_calls: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: object) -> TriggerAnswer:
        """Read an answer strictly: anything but the expected shape is a failed answer."""
        if not isinstance(data, Mapping):
            return cls(success=False, error=f"unexpected answer from trigger: {data!r}"[:500])
        calls = data.get("tool_calls")
        names = (
            tuple(str(c.get("name")) for c in calls if isinstance(c, Mapping))
            if isinstance(calls, list)
            else ()
        )
        session_id, output, error = data.get("session_id"), data.get("output"), data.get("error")
        return cls(
            success=data.get("success") is True,
            session_id=session_id if isinstance(session_id, str) and session_id else None,
            output=output if isinstance(output, str) else None,
            error=error if isinstance(error, str) else None,
            tool_calls=names,
        )


class RouteFailed(Exception):
    """The target answered, but its work failed; `answer` is what it answered."""

    def __init__(self, message: str, answer: TriggerAnswer | None = None) -> None:
        super().__init__(message)
        self.answer = answer


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
    answer: TriggerAnswer | None = None
    error: str | None = None
    route_id: uuid.UUID = field(default_factory=uuid.uuid4)

    @property
    def session_id(self) -> str | None:
        return self.answer.session_id if self.answer else None

    def to_json(self) -> dict[str, JsonValue]:
        """One target's result, as `route` and `ingest_v1` return it."""
        answer = self.answer or TriggerAnswer(success=False)
        return {
            "route_id": str(self.route_id),
            "butler": self.entry.butler,
            "prompt": self.entry.prompt,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "error": self.error,
            "session_id": answer.session_id,
            "output": answer.output,
            "tool_calls": list(answer.tool_calls),
        }


RouteOne = Callable[[RouteEntry, uuid.UUID], Awaitable[TriggerAnswer]]
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
            status: RouteStatus, answer: TriggerAnswer | None = None, error: str | None = None
        ) -> RouteOutcome:
            elapsed = int((time.monotonic() - start) * 1000)
            return RouteOutcome(entry, status, elapsed, answer, error, route_id)

        try:
            async with asyncio.timeout(timeout):
                answer = await route_one(entry, route_id)
        except TimeoutError:
            return outcome("timeout", error=f"no answer from {entry.butler} within {timeout:g} s")
        except TargetUnavailable as exc:
            return outcome("target_unavailable", error=str(exc))
        except RouteFailed as exc:
            return outcome("error", answer=exc.answer, error=str(exc))
        except Exception as exc:  # a bug, not the target's failure: keep its traceback
            log.exception("route %s to %s failed unexpectedly", route_id, entry.butler)
            return outcome("error", error=f"{exc.__class__.__name__}: {exc}")
        return outcome("success", answer=answer)

    ids = plan.ids()
    return list(await asyncio.gather(*(run(e, i) for e, i in zip(plan.entries, ids, strict=True))))


# The inbox's word for each fan-out outcome: a message whose routes all succeeded is
# `dispatched` (the fan-out log says `completed`).
INBOX_STATUS = {"completed": "dispatched", "partial": "partial", "failed": "failed"}


def inbox_status(fanout_status: str) -> str:
    return INBOX_STATUS[fanout_status]


def summarize(outcomes: list[RouteOutcome]) -> str:
    """`completed`, `partial` or `failed`, for the fan-out execution log."""
    successes = sum(o.status == "success" for o in outcomes)
    if successes == len(outcomes):
        return "completed"
    return "partial" if successes else "failed"
