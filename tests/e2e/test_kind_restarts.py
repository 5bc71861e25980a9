"""The real kubelet restarts a butler's container, and the Butler's status says so (kind only).

Only a real node has a memory limit the kernel enforces and a kubelet whose liveness
probe kills a hung process; the other backends run pods as processes of this machine.
- Memory: a process in the butler's container fills memory the cgroup is charged for
  (a memfd, so that the butler itself is the largest process) past the container's
  limit; the kernel's OOM killer ends the butler, the kubelet starts it again, and the
  Butler's status counts the restart with its reason, `OOMKilled`, and is Ready again.
- Liveness: the butler's process is frozen (SIGSTOP from the node: a deadlock, as far
  as the kubelet can tell); its readiness goes, the liveness probe fails until the
  kubelet kills the container and starts a new one, and the status counts that too.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from tests.kind import lane

from .harness.ecosystem import EcosystemHandle
from .harness.kind_node import butler_status, kubectl, pods, ready, roles, wait_for

# Past the default memory limit (512Mi), in 16 MiB writes.
FILL = (
    "import os\n"
    "fd = os.memfd_create('fill')\n"
    "chunk = b'x' * (16 << 20)\n"
    "for _ in range(64):\n"
    "    os.write(fd, chunk)\n"
    "print('not killed')\n"
)


@pytest.fixture(scope="module")
def cluster(kind_context: str, butler_ecosystem: EcosystemHandle) -> tuple[str, str]:
    assert butler_ecosystem.namespace is not None
    return kind_context, butler_ecosystem.namespace


def _butler() -> str:
    """A butler no other node test disturbs (not the switchboard)."""
    return roles()[2][-1][0]


def _container(context: str, namespace: str, butler: str) -> dict[str, Any]:
    """The butler container's status in the butler's one live pod."""
    live = [
        p
        for p in pods(context, namespace, f"butlers.dev/butler={butler}")
        if "deletionTimestamp" not in p["metadata"]
    ]
    assert len(live) == 1, f"expected one pod of {butler}, found {len(live)}"
    statuses = live[0]["status"].get("containerStatuses") or []
    found = next(s for s in statuses if s["name"] == "butler")
    return {**found, "pod": live[0]["metadata"]["name"], "node": live[0]["spec"]["nodeName"],
            "ready_pod": ready(live[0])}  # fmt: skip


def _restarted(
    context: str, namespace: str, butler: str, before: int, reason: str | None = None
) -> Any:
    """The status once it counts a restart past `before` (for `reason`) and is Ready."""

    def check() -> dict[str, Any] | None:
        status = butler_status(context, namespace, butler)
        last = status.get("lastRestart") or {}
        counted = int(status.get("restarts") or 0) > before and bool(last)
        counted = counted and reason in (None, last.get("reason"))
        return status if counted and status.get("ready") else None

    return check


def _node_docker(*args: str) -> subprocess.CompletedProcess[str]:
    """docker on the engine the kind node runs on (the lane's own, unless the cluster was
    given with --kube-context)."""
    env = dict(os.environ)
    env["DOCKER_HOST"] = os.environ.get(lane.DOCKER_HOST_ENV) or env.get("DOCKER_HOST", "")
    if not env["DOCKER_HOST"]:
        env.pop("DOCKER_HOST")
    return subprocess.run(["docker", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


@pytest.mark.timeout(600)  # the session's ecosystem may be set up in this test
def test_a_butler_killed_by_its_memory_limit_is_restarted_and_reported(
    cluster: tuple[str, str],
) -> None:
    context, namespace = cluster
    butler = _butler()
    before = _container(context, namespace, butler)
    count = int(butler_status(context, namespace, butler).get("restarts") or 0)
    argv = ["-n", namespace, "exec", f"deploy/{butler}", "-c", "butler", "--",
            "/opt/venv/bin/python", "-c", FILL]  # fmt: skip
    try:
        out = kubectl(context, *argv, timeout=120)
    except AssertionError:
        out = ""  # the exec ends with the container
    assert "not killed" not in out, "the container outlived writing past its memory limit"
    status = wait_for(
        f"{butler}'s status to count an OOMKilled restart and be Ready again",
        _restarted(context, namespace, butler, count, "OOMKilled"),
        240,
    )
    after = _container(context, namespace, butler)
    assert after["pod"] == before["pod"], "the container is restarted, the pod kept"
    assert after["restartCount"] == before["restartCount"] + 1
    assert after["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status["lastRestart"]["container"] == "butler"
    assert status["lastRestart"]["pod"] == after["pod"]
    assert status["lastRestart"]["exitCode"] == 137


@pytest.mark.timeout(600)  # the session's ecosystem may be set up in this test
def test_a_hung_butler_is_restarted_by_its_liveness_probe(cluster: tuple[str, str]) -> None:
    context, namespace = cluster
    butler = _butler()
    wait_for(f"{butler} Ready", lambda: _container(context, namespace, butler)["ready_pod"], 120)
    before = _container(context, namespace, butler)
    count = int(butler_status(context, namespace, butler).get("restarts") or 0)
    container_id = before["containerID"].split("://", 1)[-1]
    node = before["node"]
    inspect = _node_docker("exec", node, "crictl", "inspect", "--output", "go-template",
                           "--template", "{{.info.pid}}", container_id)  # fmt: skip
    assert inspect.returncode == 0, inspect.stderr
    pid = inspect.stdout.strip()
    frozen = _node_docker("exec", node, "kill", "-STOP", pid)
    assert frozen.returncode == 0, frozen.stderr
    # Readiness goes first (3 x 5 s); liveness needs 6 x 10 s, then the grace period.
    wait_for(
        f"{butler} unready while frozen",
        lambda: not _container(context, namespace, butler)["ready_pod"],
        60,
    )
    status = wait_for(
        f"{butler}'s status to count the liveness restart and be Ready again",
        _restarted(context, namespace, butler, count),
        240,
    )
    after = _container(context, namespace, butler)
    assert after["pod"] == before["pod"] and after["restartCount"] == before["restartCount"] + 1
    assert after["containerID"] != before["containerID"]
    assert status["lastRestart"]["exitCode"] == 137  # killed, after SIGTERM went unanswered
    messages = "jsonpath={.items[*].message}"
    selector = f"involvedObject.name={after['pod']}"
    events = kubectl(context, "-n", namespace, "get", "events", "-o", messages,
                     "--field-selector", selector)  # fmt: skip
    assert "failed liveness probe" in events
