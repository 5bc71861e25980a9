"""Core system routes: health, butlers (list, detail, config, skills, modules, logs)."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict

from butlers import __version__
from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.pod_logs import PodLogs
from butlers.dashboard.support import empty_data
from butlers.dashboard.views import ButlerSummary, ModuleStatus, modules_of, summary
from butlers.redaction import MASK, SENSITIVE_KEY
from butlers.stores.modules import disabled_modules

router = APIRouter(tags=["butlers"])
LOG_TAIL_BYTES = 1 << 20


class Health(BaseModel):
    status: str
    version: str
    uptime_seconds: float
    butlers: int
    directory: str
    change_feed: str  # listen | poll (LISTEN connection lost) | starting
    status_rounds: int  # completed rounds of status probes
    unprobed: int  # butlers without a status yet (shown as `unknown`)
    sse_subscribers: int


class ButlerDetail(ButlerSummary):
    instructions: str
    routing_hints: list[str]
    runtime: dict[str, Any]
    approval_rules: list[dict[str, Any]]
    spec_schedules: list[str]
    env: list[str]
    source: str | None


class ButlerConfig(BaseModel):
    butler: str
    source: str | None
    config: dict[str, Any] | None
    instructions: str | None
    claude_md: str | None = None
    agents_md: str | None = None
    manifesto_md: str | None = None


class Skill(BaseModel):
    name: str
    content: str


class ModuleState(BaseModel):
    name: str
    enabled: bool
    # spec: as `spec.modules` says; runtime: switched off by the owner (kept across restarts)
    source: Literal["spec", "runtime"]
    status: str  # active | failed | cascade_failed | disabled | unknown
    phase: str | None
    error: str | None
    disabled_by: str | None = None
    disabled_at: datetime | None = None
    toggleable: bool
    # Why it cannot be switched off at runtime (a required module), if so.
    required: str | None = None


class ModuleToggle(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool


class LogTail(BaseModel):
    butler: str
    source: str
    lines: list[str]
    truncated: bool


@router.get("/api/health", response_model=ApiResponse[Health])
async def health(dashboard: Ctx) -> dict[str, Any]:
    """The dashboard itself is up (no authentication needed)."""
    return ok(
        Health(
            status="ok",
            version=__version__,
            uptime_seconds=round(time.time() - dashboard.started_at, 3),
            butlers=len(dashboard.butlers()),
            directory=dashboard.directory.describe(),
            change_feed=dashboard.feed.mode,
            status_rounds=dashboard.monitor.rounds,
            unprobed=len(dashboard.monitor.unprobed()),
            sse_subscribers=dashboard.broker.subscriber_count,
        )
    )


@router.get("/api/butlers", response_model=ApiResponse[list[ButlerSummary]])
async def list_butlers(dashboard: Ctx) -> dict[str, Any]:
    """Every butler with its live status (probed in the background every few seconds)."""
    await dashboard.monitor.settled()
    return ok([summary(dashboard, info) for _, info in sorted(dashboard.butlers().items())])


@router.get("/api/butlers/{name}", response_model=ApiResponse[ButlerDetail])
async def butler_detail(name: str, dashboard: Ctx) -> dict[str, Any]:
    info = dashboard.butler(name)
    base = summary(dashboard, info).model_dump()
    resource = info.resource
    spec = resource.spec if resource else None
    detail = ButlerDetail(
        **base,
        instructions=spec.instructions if spec else "",
        routing_hints=list(spec.routing.hints) if spec else [],
        runtime=spec.runtime.model_dump(mode="json", exclude_none=True) if spec else {},
        approval_rules=[r.model_dump(mode="json") for r in spec.approvals.rules] if spec else [],
        spec_schedules=[s.name for s in spec.schedules] if spec else [],
        env=[e.name for e in spec.env] if spec else [],
        source=info.source,
    )
    return ok(detail)


def masked_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The Butler object with the literal values of secret-looking env entries masked."""
    spec = manifest.get("spec") or {}
    for entry in spec.get("env") or []:
        if "value" in entry and SENSITIVE_KEY.search(str(entry.get("name", ""))):
            entry["value"] = MASK
    return manifest


@router.get("/api/butlers/{name}/config", response_model=ApiResponse[ButlerConfig])
async def butler_config(name: str, dashboard: Ctx) -> dict[str, Any]:
    """The Butler resource and its instructions.

    `claude_md`, `agents_md` and `manifesto_md` are always null: a butler's whole
    configuration is its Butler resource (the instructions are `spec.instructions`).
    """
    info = dashboard.butler(name)
    resource = info.resource
    manifest = masked_manifest(resource.to_manifest()) if resource else None
    return ok(
        ButlerConfig(
            butler=name,
            source=info.source,
            config=manifest,
            instructions=resource.spec.instructions if resource else None,
        ),
        reason="a butler's configuration is its Butler resource; there are no butler.toml "
        "or CLAUDE.md/AGENTS.md/MANIFESTO.md files",
    )


@router.get(
    "/api/butlers/{name}/skills",
    response_model=ApiResponse[list[Skill]],
    openapi_extra=empty_data("butlers have modules and tools, not skill files"),
)
async def butler_skills(name: str, dashboard: Ctx) -> dict[str, Any]:
    """Always empty: butlers here have modules and tools, not skill files."""
    dashboard.butler(name)
    return ok([], supported=False, reason="butlers have no skills; see their modules and tools")


@router.get("/api/butlers/{name}/modules", response_model=ApiResponse[list[ModuleStatus]])
async def butler_modules(name: str, dashboard: Ctx) -> dict[str, Any]:
    """Each enabled module and the outcome of its start (as the butler's `status` reports)."""
    info = dashboard.butler(name)
    return ok(modules_of(dashboard, info))


def _module_state(reported: dict[str, Any], in_spec: bool) -> ModuleState:
    status = str(reported.get("status") or "unknown")
    required = reported.get("required")
    return ModuleState(
        name=str(reported.get("name")),
        enabled=status != "disabled",
        source="runtime" if status == "disabled" else "spec",
        status=status,
        phase=reported.get("phase"),
        error=reported.get("error"),
        disabled_by=reported.get("disabled_by"),
        disabled_at=reported.get("disabled_at"),
        toggleable=in_spec and not required and status != "unknown",
        required=required,
    )


@router.get("/api/butlers/{name}/module-states", response_model=ApiResponse[list[ModuleState]])
async def butler_module_states(name: str, dashboard: Ctx) -> dict[str, Any]:
    """Each module of `spec.modules`: on or off, and whether by the spec or by the owner's
    runtime switch (read from the butler's schema, so an override shows while the butler
    is down), with the outcome of its start as the butler last reported it."""
    info = dashboard.butler(name)
    overrides = await dashboard.db.read(name, disabled_modules)
    live = {m.get("name"): m for m in dashboard.monitor.get(name).modules}
    states = []
    for module in modules_of(dashboard, info):
        reported = dict(live.get(module.name) or {"name": module.name})
        row = overrides.get(module.name)
        if row is not None:
            reported |= {
                "status": "disabled",
                "phase": None,
                "error": None,
                "disabled_by": row.disabled_by,
                "disabled_at": row.disabled_at.isoformat(),
            }
        elif reported.get("status") == "disabled":
            reported["status"] = "unknown"  # switched on since the butler last reported
        states.append(_module_state(reported, module.name in info.modules))
    return ok(states)


@router.put(
    "/api/butlers/{name}/module-states/{module}/enabled",
    response_model=ApiResponse[ModuleState],
)
async def toggle_module(
    name: str, module: str, body: ModuleToggle, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Switch a module of the butler off or on while it runs (its `module_set_enabled`
    tool; kept across restarts). A required module, one that others still on depend on,
    or one whose dependency is off is TOOL_ERROR naming why; a butler that does not
    answer is BUTLER_UNREACHABLE (nothing changed)."""
    info = dashboard.butler(name)
    if module not in info.modules:
        raise NotFound(
            f"butler {name!r} has no module {module!r} in spec.modules "
            f"(its modules: {', '.join(info.modules) or 'none'})",
            butler=name,
        )
    operation = "module.enable" if body.enabled else "module.disable"
    arguments = {"module": module, "enabled": body.enabled}
    outcome = await dashboard.write(
        request, info, operation, "module_set_enabled", arguments, target=module
    )
    state = outcome.data if isinstance(outcome.data, dict) else {"name": module}
    dashboard.monitor.module_changed(name, state)
    return ok(_module_state(state, in_spec=True))


@router.get("/api/butlers/{name}/logs", response_model=ApiResponse[LogTail])
async def butler_logs(
    name: str, dashboard: Ctx, lines: Annotated[int, Query(ge=1, le=2000)] = 200
) -> dict[str, Any]:
    """The last lines of the butler's log: its log file (local ecosystems), else its pod's
    `butler` container (`--kube`, through the API server's `pods/log`). A butler without
    a log file or a pod is NOT_FOUND; an API server that refuses or does not answer,
    BUTLER_UNREACHABLE."""
    info = dashboard.butler(name)
    if info.log_path is not None:
        tail, truncated = _tail(info.log_path, lines)
        return ok(LogTail(butler=name, source=str(info.log_path), lines=tail, truncated=truncated))
    pods: PodLogs | None = getattr(dashboard.directory, "pod_logs", None)
    if pods is None or info.kube is None:
        raise NotFound(
            f"the dashboard knows no log of {name!r}: its directory "
            f"({dashboard.directory.describe()}) names no log file and no pod",
            butler=name,
        )
    pod_log = await pods.tail(name, lines, LOG_TAIL_BYTES)
    return ok(
        LogTail(
            butler=name, source=pod_log.source, lines=pod_log.lines, truncated=pod_log.truncated
        )
    )


def _tail(path: Path, count: int) -> tuple[list[str], bool]:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return [], False
    lines = data.decode("utf-8", "replace").splitlines()
    if size > LOG_TAIL_BYTES:
        lines = lines[1:]  # the first one is cut
    return lines[-count:], len(lines) > count or size > LOG_TAIL_BYTES
