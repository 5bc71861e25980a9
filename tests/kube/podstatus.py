"""What a kubelet reports about a pod: phase, conditions and container states (pure).

The kubelet keeps one `ContainerState` per container and init container; these
functions turn them into the `status` the API server stores, keeping each
condition's lastTransitionTime unless its status changed (controllers and
`kubectl wait` read these exactly as they would from a real kubelet).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerState:
    """One container as the kubelet last saw it."""

    name: str
    image: str
    init: bool = False
    state: dict[str, Any] = field(
        default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}}
    )
    last_state: dict[str, Any] = field(default_factory=dict)
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    container_id: str = ""

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def terminated(self) -> dict[str, Any] | None:
        return self.state.get("terminated")

    def wait(self, reason: str, message: str = "") -> None:
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        self.ready = False

    def run(self, pid: int) -> None:
        self.container_id = f"process://{pid}"
        self.state = {"running": {"startedAt": now_rfc3339()}}
        self.started = True

    def terminate(self, exit_code: int, reason: str = "", message: str = "") -> None:
        started = (self.state.get("running") or {}).get("startedAt")
        self.state = {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                **({"message": message} if message else {}),
                **({"startedAt": started} if started else {}),
                "finishedAt": now_rfc3339(),
                "containerID": self.container_id,
            }
        }
        self.ready = False
        self.started = False

    def restarting(self, reason: str, message: str) -> None:
        """The last run ended; the next one waits (CrashLoopBackOff)."""
        self.last_state = dict(self.state)
        self.restart_count += 1
        self.wait(reason, message)


def build_container_status(c: ContainerState) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": c.name,
        "image": c.image,
        "imageID": "",
        "state": c.state,
        "lastState": c.last_state,
        "ready": c.ready,
        "restartCount": c.restart_count,
        "started": c.started,
    }
    if c.container_id:
        status["containerID"] = c.container_id
    return status


def _condition(
    kind: str, ok: bool, previous: Mapping[str, Mapping[str, Any]], reason: str = ""
) -> dict[str, Any]:
    status = "True" if ok else "False"
    old = previous.get(kind) or {}
    changed = old.get("status") != status
    condition = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339()
        if changed
        else old.get("lastTransitionTime", now_rfc3339()),
    }
    if reason and not ok:
        condition["reason"] = reason
    return condition


def build_phase(
    init: Sequence[ContainerState], containers: Sequence[ContainerState], restart_policy: str
) -> str:
    if (
        any(c.terminated and c.terminated["exitCode"] != 0 for c in init)
        and restart_policy == "Never"
    ):
        return "Failed"
    ended = [c.terminated for c in containers]
    if containers and all(ended):
        codes = [t["exitCode"] for t in ended if t]
        if restart_policy == "Always":
            return "Running"
        if all(code == 0 for code in codes):
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"
    if any(c.running or c.terminated or c.restart_count for c in containers):
        return "Running"
    return "Pending"


def build_pod_status(
    *,
    previous: Mapping[str, Any],
    init: Sequence[ContainerState],
    containers: Sequence[ContainerState],
    restart_policy: str,
    sandbox_ready: bool,
    host_ip: str,
    pod_ip: str,
    start_time: str,
) -> dict[str, Any]:
    """The pod's whole status (phase, conditions, IPs, container statuses)."""
    old = {c["type"]: c for c in previous.get("conditions") or []}
    initialized = all(c.terminated and c.terminated["exitCode"] == 0 for c in init)
    ready = bool(containers) and all(c.ready for c in containers)
    phase = build_phase(init, containers, restart_policy)
    done = phase in {"Succeeded", "Failed"}
    conditions = [
        _condition("PodReadyToStartContainers", sandbox_ready and not done, old),
        _condition("Initialized", initialized, old, "ContainersNotInitialized"),
        _condition("Ready", ready, old, "PodCompleted" if done else "ContainersNotReady"),
        _condition("ContainersReady", ready, old, "PodCompleted" if done else "ContainersNotReady"),
    ]
    if "PodScheduled" in old:
        conditions.append(dict(old["PodScheduled"]))
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": [build_container_status(c) for c in containers],
    }
    if init:
        status["initContainerStatuses"] = [build_container_status(c) for c in init]
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    return status
