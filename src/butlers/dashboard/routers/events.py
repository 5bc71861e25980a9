"""`GET /api/events`: the live event stream (Server-Sent Events)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header

from butlers.dashboard.context import Ctx
from butlers.dashboard.events import EVENT_TYPES, EventStreamResponse

router = APIRouter(tags=["events"])


@router.get(
    "/api/events",
    response_model=None,
    responses={
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "description": "`connected` first, then events of the types "
            + ", ".join(f"`{t}`" for t in EVENT_TYPES)
            + "; a `: keepalive` comment when idle. Each event has an `id`; reconnect "
            "with `Last-Event-ID` to replay what was missed (`resync` when too much was).",
        }
    },
)
async def events(
    dashboard: Ctx,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=40)] = None,
) -> EventStreamResponse:
    return EventStreamResponse(
        dashboard.broker, last_event_id, keepalive=dashboard.settings.keepalive_seconds
    )
