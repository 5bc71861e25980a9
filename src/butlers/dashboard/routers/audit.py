"""The audit log: every write the dashboard made, from its own schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import PaginatedResponse, page
from butlers.dashboard.pagination import Limit, Offset

router = APIRouter(tags=["audit"])


class AuditEntry(BaseModel):
    id: int
    at: datetime
    actor: str
    butler: str | None
    operation: str
    target: str | None
    request: dict[str, Any]
    status: Literal["ok", "error"]
    error: str | None
    duration_ms: int | None
    client: str | None


@router.get("/api/audit-log", response_model=PaginatedResponse[AuditEntry])
async def audit_log(
    dashboard: Ctx,
    butler: str | None = None,
    operation: str | None = None,
    status: Literal["ok", "error"] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Newest first; filter by butler, operation (e.g. `state.set`), status and time."""
    rows, total = await dashboard.audit.list(
        butler=butler,
        operation=operation,
        status=status,
        since=since,
        until=until,
        offset=offset,
        limit=limit,
    )
    return page([AuditEntry(**r) for r in rows], total=total, offset=offset, limit=limit)
