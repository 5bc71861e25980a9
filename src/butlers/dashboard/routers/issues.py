"""Issues: everything that needs a look, newest first.

Unreachable or unready butlers, modules that failed to start, schedules whose
last run failed, session errors grouped by message, failed routes, and writes
of the dashboard that failed (its audit log).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.connectors import ConnectorsRead, connector_health
from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.modules.switchboard import store as switchboard

router = APIRouter(tags=["issues"])
WINDOW = timedelta(days=7)
_VARIABLE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}|\d+(\.\d+)?"
)


class Issue(BaseModel):
    id: str
    severity: Literal["critical", "warning", "info"]
    kind: Literal[
        "butler_down",
        "butler_degraded",
        "module_failed",
        "schedule_failed",
        "session_errors",
        "route_failed",
        "dashboard_write_failed",
        "connector_failing",
    ]
    butler: str | None
    title: str
    message: str
    count: int
    first_seen_at: datetime | None
    last_seen_at: datetime | None


def normalize_error(message: str) -> str:
    """Ids and numbers out, so occurrences of one error group together."""
    return _VARIABLE.sub("…", message.strip())[:300]


def _id(*parts: Any) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:16]


def _live(dashboard: Dashboard) -> list[Issue]:
    issues = []
    for name in sorted(dashboard.butlers()):
        health = dashboard.monitor.get(name)
        if health.status in ("down", "degraded"):
            down = health.status == "down"
            issues.append(
                Issue(
                    id=_id("status", name, health.status),
                    severity="critical" if down else "warning",
                    kind="butler_down" if down else "butler_degraded",
                    butler=name,
                    title=f"{name} is {health.status}",
                    message=health.reason or "",
                    count=1,
                    first_seen_at=health.checked_at,
                    last_seen_at=health.checked_at,
                )
            )
        for module in health.modules:
            if module.get("status") in ("active", "disabled", None):
                continue
            issues.append(
                Issue(
                    id=_id("module", name, module.get("name")),
                    severity="warning",  # the butler is degraded until it is fixed
                    kind="module_failed",
                    butler=name,
                    title=f"module {module.get('name')} of {name} is {module.get('status')}",
                    message=f"phase {module.get('phase')}: {module.get('error')}",
                    count=1,
                    first_seen_at=health.checked_at,
                    last_seen_at=health.checked_at,
                )
            )
    return issues


@router.get("/api/issues", response_model=ApiResponse[list[Issue]])
async def issues(dashboard: Ctx) -> dict[str, Any]:
    since = datetime.now(UTC) - WINDOW
    schedules, errors, routes, connectors = await asyncio.gather(
        dashboard.db.fan_out(
            "SELECT name, last_error, last_run_at, updated_at FROM scheduled_tasks "
            "WHERE status = 'error'"
        ),
        dashboard.db.fan_out(
            "SELECT error, count(*) AS n, min(created_at) AS first, max(created_at) AS last "
            "FROM sessions WHERE status = 'error' AND created_at >= $1 GROUP BY error",
            since,
        ),
        dashboard.db.fan_read(
            lambda pool: switchboard.route_failures(pool, since),
            dashboard.with_module("switchboard"),
        ),
        connector_health(dashboard),
    )
    found = _live(dashboard) + _connectors(connectors)
    for name, row in schedules.rows():
        found.append(
            Issue(
                id=_id("schedule", name, row["name"]),
                severity="critical",
                kind="schedule_failed",
                butler=name,
                title=f"schedule {row['name']} of {name} failed",
                message=row["last_error"] or "",
                count=1,
                first_seen_at=row["last_run_at"],
                last_seen_at=row["last_run_at"] or row["updated_at"],
            )
        )
    found += _grouped(
        errors.rows(), "session_errors", "warning", lambda n, r: f"session errors on {n}"
    )
    found += _grouped(
        ((name, asdict(route)) for name, route in routes.rows()),
        "route_failed",
        "warning",
        lambda n, r: f"routes from {n} to {r['butler']}: {r['status']}",
    )
    found += await _audit_errors(dashboard, since)
    found.sort(key=lambda i: i.last_seen_at or datetime.min.replace(tzinfo=UTC), reverse=True)
    failed = sorted({*schedules.failed, *errors.failed, *routes.failed, *connectors.failed_butlers})
    return ok(found, failed_butlers=failed)


def _connectors(read: ConnectorsRead) -> list[Issue]:
    """A connector that fails or stalls: messages written to the owner's channel are
    not reaching the butlers."""
    return [
        Issue(
            id=_id("connector", c.butler, c.channel, c.name),
            severity="critical" if c.state == "failing" else "warning",
            kind="connector_failing",
            butler=c.butler,
            title=f"{c.channel} connector {c.name} on {c.butler} is {c.state}",
            message=(c.reason or "")[:500],
            count=max(c.errors, 1),
            first_seen_at=c.last_error_at or c.last_poll_at,
            last_seen_at=c.last_error_at or c.last_poll_at,
        )
        for c in read.connectors
        if c.state in ("failing", "stalled")
    ]


def _grouped(
    rows: Iterable[tuple[str, Mapping[str, Any]]], kind: str, severity: str, title: Any
) -> list[Issue]:
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for name, row in rows:
        text = normalize_error(row["error"] or "(no message)")
        key = (name, title(name, row) + "\0" + text)
        group = groups.setdefault(
            key, {"n": 0, "first": row["first"], "last": row["last"], "row": row, "text": text}
        )
        group["n"] += row["n"]
        group["first"] = min(group["first"], row["first"])
        group["last"] = max(group["last"], row["last"])
    return [
        Issue(
            id=_id(kind, name, label),
            severity=severity,  # type: ignore[arg-type]
            kind=kind,  # type: ignore[arg-type]
            butler=name,
            title=title(name, group["row"]),
            message=group["text"],
            count=group["n"],
            first_seen_at=group["first"],
            last_seen_at=group["last"],
        )
        for (name, label), group in groups.items()
    ]


async def _audit_errors(dashboard: Dashboard, since: datetime) -> list[Issue]:
    try:
        pool = await dashboard.db.own_pool()
        rows = await pool.fetch(
            "SELECT butler, operation, error, count(*) AS n, min(at) AS first, max(at) AS last "
            "FROM audit_log WHERE status = 'error' AND at >= $1 GROUP BY butler, operation, error",
            since,
        )
    except Exception:
        return []
    return [
        Issue(
            id=_id("audit", row["butler"], row["operation"], row["error"]),
            severity="info",
            kind="dashboard_write_failed",
            butler=row["butler"],
            title=f"dashboard {row['operation']} on {row['butler']} failed",
            message=normalize_error(row["error"] or ""),
            count=row["n"],
            first_seen_at=row["first"],
            last_seen_at=row["last"],
        )
        for row in rows
    ]
