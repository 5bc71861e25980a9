"""Views of a butler shared by several routes: identity, live status and modules."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from butlers.dashboard.context import Dashboard
from butlers.dashboard.directory import ButlerInfo

Status = Literal["ok", "degraded", "down", "unknown"]


class ModuleStatus(BaseModel):
    name: str
    status: str  # active | failed | cascade_failed | disabled (by the owner) | unknown
    phase: str | None = None
    error: str | None = None
    enabled: bool = True  # False: switched off by the owner at runtime


class KubeCondition(BaseModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class KubeStatus(BaseModel):
    namespace: str
    phase: str | None = None
    endpoint: str | None = None
    observed_generation: int | None = None
    conditions: list[KubeCondition] = []


class ButlerSummary(BaseModel):
    name: str
    description: str
    status: Status
    reason: str | None
    url: str
    db_schema: str
    modules: list[ModuleStatus]
    checked_at: datetime | None
    version: str | None
    uptime_seconds: float | None
    # Starts after the first (crashes and kills included), the last one's time, and
    # whether the run before it ended without a clean stop. None: not reported yet.
    restarts: int | None = None
    last_restart_at: datetime | None = None
    last_restart_after_crash: bool | None = None
    kube: KubeStatus | None = None


def modules_of(dashboard: Dashboard, info: ButlerInfo) -> list[ModuleStatus]:
    """The butler's enabled modules, with the outcome its `status` tool last reported."""
    live = {m.get("name"): m for m in dashboard.monitor.get(info.name).modules}
    names = list(info.modules) + [n for n in live if n not in info.modules]
    result = []
    for name in names:
        reported: dict[str, Any] = live.get(name) or {}
        result.append(
            ModuleStatus(
                name=str(name),
                status=str(reported.get("status") or "unknown"),
                phase=reported.get("phase"),
                error=reported.get("error"),
                enabled=reported.get("status") != "disabled",
            )
        )
    return result


def _restarts(starts: dict[str, Any] | None) -> dict[str, Any]:
    if not starts or not isinstance(starts.get("restarts"), int):
        return {}
    restarted = starts["restarts"] > 0
    return {
        "restarts": starts["restarts"],
        "last_restart_at": starts.get("started_at") if restarted else None,
        "last_restart_after_crash": bool(starts.get("previous_crashed")) if restarted else None,
    }


def summary(dashboard: Dashboard, info: ButlerInfo) -> ButlerSummary:
    health = dashboard.monitor.get(info.name)
    return ButlerSummary(
        name=info.name,
        description=info.description,
        status=health.status,  # type: ignore[arg-type]
        reason=health.reason,
        url=info.url,
        db_schema=info.schema,
        modules=modules_of(dashboard, info),
        checked_at=health.checked_at,
        version=health.version,
        uptime_seconds=health.uptime_seconds,
        **_restarts(health.starts),
        kube=KubeStatus.model_validate(info.kube) if info.kube else None,
    )
