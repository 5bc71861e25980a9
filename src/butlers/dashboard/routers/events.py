"""`GET /api/events`: the live event stream (Server-Sent Events)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header
from pydantic import BaseModel

from butlers.dashboard.context import Ctx
from butlers.dashboard.events import EVENT_TYPES, EventStreamResponse, EventType

router = APIRouter(tags=["events"])


class SseEvent(BaseModel):
    """One event of the stream, as `id: <id>`, `event: <type>`, `data: <JSON object>`
    lines (`connected` and `feed_status` may come without an id)."""

    id: int | None
    type: EventType
    data: dict[str, Any]


@router.get(
    "/api/events",
    response_model=None,
    response_class=EventStreamResponse,
    status_code=200,
    responses={
        200: {
            "model": SseEvent,
            # Each event of the stream is an SseEvent (an object, not the string FastAPI
            # assumes for a non-JSON response).
            "content": {"text/event-stream": {"schema": {"type": "object"}}},
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
