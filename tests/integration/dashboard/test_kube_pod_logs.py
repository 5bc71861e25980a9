"""`--kube`: a butler's log is its pod's `butler` container log, read through `pods/log`.

The API server is kmock's emulator; its `pods` list honours label selectors and
`pods/<name>/log` answers as the API server relays the kubelet (`tailLines`, then
`limitBytes` from the start: `tests.kube.kubelet_logs.select_log`; 400 for a container
that never ran, 404 for an unknown pod).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import kmock
import pytest

from butlers.dashboard.errors import ButlerUnreachable, NotFound
from butlers.dashboard.kube import KubeAccess, KubeDirectory
from butlers.dashboard.pod_logs import PodLogs
from tests.kube.kubelet_logs import select_log
from tests.support.kube_emulator import declare_cluster

NAMESPACE = "dash-logs"
BOUND = 1 << 20


def _status(message: str, code: int) -> kmock.Response:
    return kmock.Response(
        status=code, payload={"kind": "Status", "status": "Failure", "message": message}
    )


@dataclass
class FakePods:
    """Pods of the namespace and their containers' logs, served by the emulator."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    refuse: int | None = None  # answer listing with this status (RBAC, say)
    refuse_log: int | None = None  # answer reading a log with this status
    asked: list[dict[str, str]] = field(default_factory=list)

    def add(
        self, name: str, butler: str, state: str = "running", created: str = "2026-01-01T00:00:00Z"
    ) -> None:
        states = {"running": {"running": {}}, "waiting": {"waiting": {"reason": "Pending"}}}
        self.pods[name] = {
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "creationTimestamp": created,
                "labels": {"app.kubernetes.io/name": "butler", "butlers.dev/butler": butler},
            },
            "status": {"containerStatuses": [{"name": "butler", "state": states[state]}]},
        }

    def list(self, request: kmock.Request) -> Any:
        if self.refuse:
            return _status('pods is forbidden: cannot list resource "pods"', self.refuse)
        terms = dict(t.split("=", 1) for t in request.params.get("labelSelector", "").split(","))
        items = [p for p in self.pods.values() if terms.items() <= p["metadata"]["labels"].items()]
        limit = int(request.params.get("limit", "500"))
        # Always a Response with its status: kmock keeps the last status a reaction gave.
        return kmock.Response(status=200, payload={"kind": "PodList", "items": items[:limit]})

    def log(self, request: kmock.Request) -> Any:
        if self.refuse_log:
            message = 'pods "x" is forbidden: cannot get resource "pods/log"'
            return _status(message, self.refuse_log)
        self.asked.append(dict(request.params))
        pod = request.url.path.split("/")[-2]
        container = request.params["container"]
        if pod not in self.pods:
            return _status(f'pods "{pod}" not found', 404)
        if (pod, container) not in self.logs:
            message = f'container "{container}" in pod "{pod}" is waiting to start'
            return _status(message, 400)
        tail, limit = request.params.get("tailLines"), request.params.get("limitBytes")
        data = select_log(
            self.logs[pod, container], int(tail) if tail else None, int(limit) if limit else None
        )
        return kmock.Response(status=200, payload=data)


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakePods, PodLogs]]:
    fake = FakePods()
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare_cluster(emulator, NAMESPACE)
        emulator[f"get /api/v1/namespaces/{NAMESPACE}/pods"] << fake.list
        emulator["get", re.compile(rf"/api/v1/namespaces/{NAMESPACE}/pods/[^/]+/log")] << fake.log
        directory = KubeDirectory(NAMESPACE, KubeAccess(server=str(emulator.url).rstrip("/")))
        try:
            yield fake, directory.pod_logs
        finally:
            await directory.aclose()


def lines(*texts: str) -> bytes:
    return "".join(f"{t}\n" for t in texts).encode()


async def test_the_last_lines_of_the_butlers_running_container(
    cluster: tuple[FakePods, PodLogs],
) -> None:
    fake, pods = cluster
    fake.add("health-a", "health")
    fake.add("general-a", "general")
    fake.logs["health-a", "butler"] = lines(*(f"health {i}" for i in range(10)))
    fake.logs["health-a", "migrate"] = lines("migrated")
    fake.logs["general-a", "butler"] = lines("general 0")
    tail = await pods.tail("health", 3, BOUND)
    assert tail.lines == ["health 7", "health 8", "health 9"]
    assert tail.truncated is True
    assert tail.source == f"pod {NAMESPACE}/health-a, container butler"
    assert fake.asked[-1]["container"] == "butler"


async def test_a_log_shorter_than_asked_is_whole(cluster: tuple[FakePods, PodLogs]) -> None:
    fake, pods = cluster
    fake.add("health-a", "health")
    fake.logs["health-a", "butler"] = lines("one", "two\rand a half")  # the kubelet's lines
    tail = await pods.tail("health", 2, BOUND)
    assert (tail.lines, tail.truncated) == (["one", "two\rand a half"], False)


async def test_during_a_rollout_the_running_pod_wins_over_a_newer_starting_one(
    cluster: tuple[FakePods, PodLogs],
) -> None:
    fake, pods = cluster
    fake.add("health-old", "health", "running", "2026-01-01T00:00:00Z")
    fake.add("health-new", "health", "waiting", "2026-01-02T00:00:00Z")
    fake.logs["health-old", "butler"] = lines("old and running")
    assert (await pods.tail("health", 5, BOUND)).lines == ["old and running"]
    fake.add("health-newer", "health", "running", "2026-01-03T00:00:00Z")
    fake.logs["health-newer", "butler"] = lines("newer and running")
    assert (await pods.tail("health", 5, BOUND)).lines == ["newer and running"]


async def test_the_newest_lines_are_kept_when_they_exceed_the_byte_bound(
    cluster: tuple[FakePods, PodLogs],
) -> None:
    fake, pods = cluster
    fake.add("health-a", "health")
    fake.logs["health-a", "butler"] = lines(*(f"{i:03d} " + "x" * 95 for i in range(50)))
    tail = await pods.tail("health", 40, 1000)  # 40 lines of 100 bytes do not fit
    assert tail.truncated is True
    assert tail.lines[-1].startswith("049 ") and len(tail.lines) <= 10
    assert all(len(line) == 99 for line in tail.lines), "whole lines only"
    assert sum(len(line) + 1 for line in tail.lines) <= 1000
    assert fake.asked[0]["limitBytes"] == "1000"  # the bound is the API server's too
    one = await pods.tail("health", 1, 30)  # not even the last line fits: its start
    assert (one.lines, one.truncated) == (["049 " + "x" * 26], True)


async def test_a_butler_without_a_pod_is_not_found(cluster: tuple[FakePods, PodLogs]) -> None:
    fake, pods = cluster
    fake.add("general-a", "general")
    with pytest.raises(NotFound, match=r"'health' has no pod in namespace dash-logs") as caught:
        await pods.tail("health", 5, BOUND)
    assert "kubectl get butler health -n dash-logs" in caught.value.message
    assert caught.value.butler == "health"


async def test_a_container_that_never_ran_is_not_found_with_the_kubelets_reason(
    cluster: tuple[FakePods, PodLogs],
) -> None:
    fake, pods = cluster
    fake.add("health-a", "health", "waiting")
    with pytest.raises(NotFound, match="health-a has no log: .*waiting to start"):
        await pods.tail("health", 5, BOUND)


async def test_a_refusing_api_server_is_unreachable_naming_the_role(
    cluster: tuple[FakePods, PodLogs],
) -> None:
    fake, pods = cluster
    fake.add("health-a", "health")
    fake.refuse = 403
    with pytest.raises(ButlerUnreachable, match=r"answered 403 .*`list` on pods.*forbidden"):
        await pods.tail("health", 5, BOUND)
    fake.refuse, fake.refuse_log = None, 403
    with pytest.raises(ButlerUnreachable, match=r"answered 403 .*`get` on pods/log.*forbidden"):
        await pods.tail("health", 5, BOUND)
    fake.refuse_log = 500
    with pytest.raises(
        ButlerUnreachable, match=r"log answered 500 in namespace dash-logs: "
    ) as caught:
        await pods.tail("health", 5, BOUND)
    assert "Role" not in caught.value.message
