"""Quarantined messages: the owner releases or drops what strangers sent.

The list is the switchboard's inbox filtered by status
(`/api/switchboard/messages?status=quarantined`, each row with its
`quarantine_reason`); the decisions go through the switchboard's `message_release` /
`message_drop` tools (audited), which no LLM session holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.module_views import butlers_of
from butlers.dashboard.sql import parse_uuid

router = APIRouter(tags=["switchboard"])
MODULE = "switchboard"


class QuarantineDecision(BaseModel):
    request_id: str
    butler: str
    status: str
    sender: str
    channel: str
    quarantine_reason: str | None
    received_at: datetime | None
    completed_at: datetime | None


async def _decide(
    request: Request, dashboard: Dashboard, request_id: str, tool: str
) -> dict[str, Any]:
    parse_uuid(request_id, "request_id")
    names = butlers_of(dashboard, MODULE)
    if not names:
        raise NotFound("no butler runs the switchboard module")
    info = dashboard.butler(names[0])
    operation = f"message.{tool.removeprefix('message_')}"
    outcome = await dashboard.write(
        request, info, operation, tool, {"request_id": request_id}, target=request_id
    )
    row = outcome.data if isinstance(outcome.data, dict) else {}
    return ok(
        QuarantineDecision(
            request_id=str(row.get("request_id")),
            butler=info.name,
            status=str(row.get("status")),
            sender=str(row.get("sender")),
            channel=str(row.get("channel")),
            quarantine_reason=row.get("quarantine_reason"),
            received_at=row.get("received_at"),
            completed_at=row.get("completed_at"),
        )
    )


@router.post(
    "/api/switchboard/messages/{request_id}/release",
    response_model=ApiResponse[QuarantineDecision],
)
async def release(request_id: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Let a quarantined message in: it is classified, routed and answered like the
    owner's own. A message not quarantined is TOOL_ERROR."""
    return await _decide(request, dashboard, request_id, "message_release")


@router.post(
    "/api/switchboard/messages/{request_id}/drop",
    response_model=ApiResponse[QuarantineDecision],
)
async def drop(request_id: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Drop a quarantined message (kept as `dropped`, never processed)."""
    return await _decide(request, dashboard, request_id, "message_drop")
