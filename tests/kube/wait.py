"""Waiting on a cluster: poll a condition until it holds, with a deadline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from butlers.waiting import WaitTimeout as PollTimeout
from butlers.waiting import wait_until as poll_until

from .api import KubeApi, build_path

T = TypeVar("T")
POLL = 0.1


class WaitTimeout(AssertionError):
    """The condition did not hold in time; the message says what was awaited and the last state."""


async def wait_until(
    check: Callable[[], Awaitable[T | None] | T | None],
    what: str,
    timeout: float = 60.0,
    describe: Callable[[], Awaitable[Any]] | None = None,
) -> T:
    """The first truthy value of `check()`; WaitTimeout (with the last state, when
    `describe` is given) after `timeout` seconds. The polling is `butlers.waiting`'s."""
    try:
        value: T = await poll_until(check, timeout=timeout, interval=POLL)
    except PollTimeout:
        detail = f"; last state: {await describe()}" if describe else ""
        raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}{detail}") from None
    return value


def condition_status(obj: dict[str, Any] | None, kind: str) -> str | None:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


async def wait_deployment_available(
    api: KubeApi, namespace: str, name: str, timeout: float = 60.0
) -> dict[str, Any]:
    """Until the Deployment's current generation has all its replicas updated and available."""
    path = build_path("apps/v1", "deployments", namespace, name)

    async def check() -> dict[str, Any] | None:
        d = await api.find(path)
        if d is None:
            return None
        status, want = d.get("status") or {}, d["spec"].get("replicas", 1)
        done = (
            status.get("observedGeneration", 0) >= d["metadata"]["generation"]
            and status.get("updatedReplicas", 0) == want
            and status.get("availableReplicas", 0) == want
            and status.get("replicas", 0) == want
        )
        return d if done else None

    async def describe() -> Any:
        return {
            "deployment": ((await api.find(path)) or {}).get("status"),
            "pods": await describe_pods(api, namespace),
        }

    return await wait_until(check, f"deployment {namespace}/{name} available", timeout, describe)


async def describe_pods(api: KubeApi, namespace: str) -> list[dict[str, Any]]:
    """Each pod's phase and container states: what a failed wait should show."""
    described = []
    for pod in await api.list(build_path("v1", "pods", namespace)):
        status = pod.get("status") or {}
        described.append(
            {
                "pod": pod["metadata"]["name"],
                "node": pod["spec"].get("nodeName"),
                "phase": status.get("phase"),
                "containers": {
                    c["name"]: {
                        "state": c.get("state"),
                        "ready": c.get("ready"),
                        "restarts": c.get("restartCount"),
                    }
                    for c in [
                        *(status.get("initContainerStatuses") or []),
                        *(status.get("containerStatuses") or []),
                    ]
                },
            }
        )
    return described
