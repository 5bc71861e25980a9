"""Cancelling a reminder from the dashboard (the list is the reminders module's view,
`/api/reminders`): the owning butler's `reminder_cancel`, audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.module_views import butlers_of
from butlers.dashboard.sql import parse_uuid

router = APIRouter(tags=["reminders"])
MODULE = "reminders"


class ReminderCancelled(BaseModel):
    id: str
    butler: str
    text: str
    status: str
    cancelled_by: str | None
    next_due_at: datetime | None


@router.post(
    "/api/butlers/{name}/reminders/{reminder_id}/cancel",
    response_model=ApiResponse[ReminderCancelled],
)
async def cancel_reminder(
    name: str, reminder_id: str, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Cancel a pending reminder (the butler's `reminder_cancel`, as the owner, audited).
    One that is not pending, or not found, is TOOL_ERROR."""
    if not butlers_of(dashboard, MODULE, name):
        raise NotFound(f"butler {name!r} does not run the reminders module", butler=name)
    key = parse_uuid(reminder_id, "reminder id")
    outcome = await dashboard.write(
        request,
        dashboard.butler(name),
        "reminder.cancel",
        "reminder_cancel",
        {"reminder_id": str(key)},
        target=str(key),
    )
    row = outcome.data
    return ok(ReminderCancelled.model_validate({**row, "butler": name}))
