"""A busy, unreachable or crashed target is asked again under the same route key,
within the retry budget; then the route fails with the reason."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from butlers.mcp_clients import EndpointUnavailable, OutcomeUnknown, ToolFailed, ToolResult
from butlers.modules.switchboard import pipeline as pipeline_module
from butlers.modules.switchboard.pipeline import Pipeline
from butlers.switchboard.classification import RouteEntry
from butlers.switchboard.dispatch import RouteFailed, TargetUnavailable

ANSWER = {"success": True, "session_id": str(uuid.uuid4()), "output": "done", "tool_calls": []}


class Registry:
    async def registry(self, _stale: float) -> list[Any]:
        return [SimpleNamespace(name="health", url="http://health/mcp", alive=True, modules=[])]


class Target:
    """Fails with each of `failures` in turn, then answers; records the keys it got."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.keys: list[str] = []

    async def call_tool(self, _url: str, _name: str, arguments: dict[str, Any], **_: Any) -> Any:
        self.keys.append(arguments["idempotency_key"])
        if self.failures:
            raise self.failures.pop(0)
        return SimpleNamespace(data=ANSWER)


def _busy() -> ToolFailed:
    text = "butler 'health' is busy: 10 sessions are running or queued (the limit is 10)"
    return ToolFailed(ToolResult(None, text, True, {}))


def _pipeline(target: Target, budget: float, budgets: dict[str, float] | None = None) -> Pipeline:
    return Pipeline(
        butler="switchboard",
        store=Registry(),  # type: ignore[arg-type]
        clients=target,  # type: ignore[arg-type]
        spawner=None,  # type: ignore[arg-type]
        classification_timeout=1,
        route_timeout=30,
        stale_after=60,
        triage=None,  # type: ignore[arg-type]
        retry_budget=budget,
        retry_budgets=budgets,
    )


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_module, "RETRY_FIRST", 0.01)
    monkeypatch.setattr(pipeline_module, "RETRY_MAX", 0.02)


async def test_busy_down_and_crashed_targets_are_asked_again_under_the_same_key() -> None:
    target = Target([_busy(), EndpointUnavailable("503"), OutcomeUnknown("connection reset")])
    route_id = uuid.uuid4()
    router = _pipeline(target, budget=5)._router(None)
    answer = await router(RouteEntry("health", "log 72 kg", "log 72 kg"), route_id)
    assert answer.success and answer.output == "done"
    assert target.keys == [f"route:{route_id}"] * 4


async def test_past_the_budget_the_route_fails_with_the_last_reason() -> None:
    router = _pipeline(Target([EndpointUnavailable("refused")] * 1000), budget=0.1)._router(None)
    with pytest.raises(TargetUnavailable, match=r"refused \(gave up after \d+ attempts in 0.1 s\)"):
        await router(RouteEntry("health", "p", "p"), uuid.uuid4())
    router = _pipeline(Target([_busy() for _ in range(1000)]), budget=0.1)._router(None)
    with pytest.raises(RouteFailed, match="is busy"):
        await router(RouteEntry("health", "p", "p"), uuid.uuid4())


async def test_a_target_that_refuses_the_work_is_not_asked_again() -> None:
    target = Target([ToolFailed(ToolResult(None, "idempotency key conflict", True, {}))])
    router = _pipeline(target, budget=5)._router(None)
    with pytest.raises(RouteFailed, match="conflict"):
        await router(RouteEntry("health", "p", "p"), uuid.uuid4())
    assert len(target.keys) == 1


async def test_a_butler_with_its_own_budget_is_asked_again_for_that_long() -> None:
    failing = Target([EndpointUnavailable("refused")] * 1000)
    router = _pipeline(failing, budget=60, budgets={"health": 0.1})._router(None)
    with pytest.raises(TargetUnavailable, match=r"gave up after \d+ attempts in 0.1 s"):
        await router(RouteEntry("health", "p", "p"), uuid.uuid4())
    target = Target([EndpointUnavailable("refused")] * 3)  # other butlers: the default
    router = _pipeline(target, budget=5, budgets={"general": 0.1})._router(None)
    assert (await router(RouteEntry("health", "p", "p"), uuid.uuid4())).success
