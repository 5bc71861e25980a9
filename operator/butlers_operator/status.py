"""The status a Butler reports: conditions a user can act on, a phase, the endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DATABASE_READY = "DatabaseReady"
AVAILABLE = "Available"
READY = "Ready"


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool | None  # None: Unknown
    reason: str
    message: str

    @property
    def status_text(self) -> str:
        return "Unknown" if self.status is None else str(self.status)


def build_condition_list(
    conditions: list[Condition],
    previous: list[Mapping[str, Any]],
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Kubernetes-style conditions; `lastTransitionTime` moves only when the status does."""
    before = {c.get("type"): c for c in previous}
    out = []
    for condition in conditions:
        old = before.get(condition.type, {})
        changed = old.get("status") != condition.status_text
        item: dict[str, Any] = {
            "type": condition.type,
            "status": condition.status_text,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": now if changed else old.get("lastTransitionTime", now),
        }
        if generation is not None:
            item["observedGeneration"] = generation
        out.append(item)
    return out


def build_available_condition(deployment: Mapping[str, Any] | None) -> Condition:
    """From the Deployment's own status, written by the Deployment controller."""
    if deployment is None:
        return Condition(AVAILABLE, False, "DeploymentMissing", "the Deployment does not exist yet")
    status = deployment.get("status") or {}
    available = int(status.get("availableReplicas") or 0)
    if available >= 1:
        return Condition(AVAILABLE, True, "MinimumReplicasAvailable", "the butler pod is ready")
    for item in status.get("conditions") or []:
        if item.get("type") == "Progressing" and item.get("status") == "False":
            return Condition(AVAILABLE, False, "RolloutFailed", item.get("message", ""))
    return Condition(
        AVAILABLE,
        False,
        "PodNotReady",
        "waiting for the butler pod to pass its readiness check (/ready); "
        "see `kubectl describe pod` and the pod's logs if this persists",
    )


def build_ready_condition(database: Condition, available: Condition) -> Condition:
    if not database.status:
        return Condition(READY, False, database.reason, database.message)
    if not available.status:
        return Condition(READY, False, available.reason, available.message)
    return Condition(READY, True, "Ready", "the butler serves MCP")


def build_phase(database: Condition, available: Condition, invalid: bool = False) -> str:
    if invalid:
        return "Failed"
    if not database.status:
        return "Pending"
    return "Ready" if available.status else "Provisioning"


def build_status(
    *,
    database: Condition,
    available: Condition,
    previous: Mapping[str, Any],
    now: str,
    generation: int | None,
    endpoint: str | None = None,
    schema: str | None = None,
    invalid: bool = False,
) -> dict[str, Any]:
    """The whole `status` to merge into the Butler."""
    ready = build_ready_condition(database, available)
    status: dict[str, Any] = {
        "phase": build_phase(database, available, invalid),
        "ready": bool(ready.status),
        "conditions": build_condition_list(
            [database, available, ready], list(previous.get("conditions") or []), now, generation
        ),
    }
    if generation is not None:
        status["observedGeneration"] = generation
    if endpoint:
        status["endpoint"] = endpoint
    if schema:
        status["schema"] = schema
    return status
