"""Conversations: each message that reached the switchboard, what became of it (its
classification, routes, the sessions they ran and their tool calls) and the reply sent
back with its delivery state; a box to write as the owner (the `dashboard` channel,
through the switchboard's `ingest_v1`, answered on the page); the channel connectors'
health. Quarantined messages are released or dropped through `quarantine.py`.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from butlers.dashboard.connectors import ConnectorHealth, connector_health
from butlers.dashboard.context import Ctx, Dashboard, actor
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.modules.switchboard import store
from butlers.spec import SWITCHBOARD_MODULE

router = APIRouter(tags=["conversations"])
MessageStatus = Annotated[str, Field(max_length=32)]
# The tools each session called, as the sessions table keeps them.
SESSIONS_SQL = (
    "SELECT session_id::text AS id, status, coalesce((SELECT array_agg(c->>'name') "
    "FROM jsonb_array_elements(CASE WHEN jsonb_typeof(tool_calls) = 'array' "
    "THEN tool_calls ELSE '[]'::jsonb END) AS c), '{}') AS tools "
    "FROM sessions WHERE session_id = ANY($1::uuid[])"
)


class ConversationRoute(BaseModel):
    route_id: str
    butler: str
    status: str
    segment: str | None
    error: str | None
    duration_ms: int | None
    session_id: str | None
    session_status: str | None  # None: the session is not (or no longer) readable
    tool_calls: list[str]


class ConversationReply(BaseModel):
    state: str | None  # pending | sent | failed; None: nothing to answer on
    text: str | None
    error: str | None
    delivery_id: str | None  # the messenger's delivery row
    attempts: int


class Conversation(BaseModel):
    request_id: str
    butler: str  # the switchboard that holds it
    channel: str
    sender: str
    text: str
    status: str
    thread_id: str | None
    trace_id: str | None
    received_at: datetime
    completed_at: datetime | None
    error: str | None
    quarantine_reason: str | None
    fallback: bool
    classification_reason: str | None
    triage: dict[str, Any] | None
    routes: list[ConversationRoute]
    reply: ConversationReply


class OwnerMessage(BaseModel):
    """A message written in the dashboard as the owner."""

    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, Field(min_length=1, max_length=20_000)]


class OwnerMessageSent(BaseModel):
    request_id: str
    status: str
    duplicate: bool


def _switchboard(dashboard: Dashboard) -> str:
    names = dashboard.with_module(SWITCHBOARD_MODULE)
    if not names:
        raise NotFound("no butler runs the switchboard module")
    return names[0]


async def _sessions(
    dashboard: Dashboard, routes: list[store.RouteShown]
) -> dict[str, tuple[str, list[str]]]:
    """session id → (status, tools called), read on each target butler."""
    wanted: dict[str, list[uuid.UUID]] = defaultdict(list)
    known = dashboard.butlers()
    for route in routes:
        if route.session_id is not None and route.target in known:
            wanted[route.target].append(route.session_id)
    if not wanted:
        return {}
    found = await dashboard.db.fan_out(
        SESSIONS_SQL,
        butler_names=sorted(wanted),
        per_butler_args={name: [ids] for name, ids in wanted.items()},
    )
    return {row["id"]: (row["status"], list(row["tools"])) for _n, row in found.rows()}


def _conversation(
    butler: str,
    row: store.ConversationShown,
    routes: list[store.RouteShown],
    sessions: dict[str, tuple[str, list[str]]],
) -> Conversation:
    plan = row.classification if isinstance(row.classification, dict) else {}
    triage = plan.get("triage")
    shown = []
    for route in routes:
        session = sessions.get(str(route.session_id)) if route.session_id else None
        shown.append(
            ConversationRoute(
                route_id=str(route.id),
                butler=route.target,
                status=route.status,
                segment=route.segment,
                error=route.error,
                duration_ms=route.duration_ms,
                session_id=str(route.session_id) if route.session_id else None,
                session_status=session[0] if session else None,
                tool_calls=session[1] if session else [],
            )
        )
    return Conversation(
        request_id=str(row.request_id),
        butler=butler,
        channel=row.channel,
        sender=row.sender,
        text=row.text,
        status=row.status,
        thread_id=row.thread_id,
        trace_id=row.trace_id,
        received_at=row.received_at,
        completed_at=row.completed_at,
        error=row.error,
        quarantine_reason=row.quarantine_reason,
        fallback=bool(plan.get("fallback")),
        classification_reason=str(plan["reason"]) if plan.get("reason") else None,
        triage=triage if isinstance(triage, dict) else None,
        routes=shown,
        reply=ConversationReply(
            state=row.reply_state,
            text=row.reply_text,
            error=row.reply_error,
            delivery_id=str(row.reply_delivery_id) if row.reply_delivery_id else None,
            attempts=row.reply_attempts,
        ),
    )


@router.get("/api/conversations", response_model=ApiResponse[list[Conversation]])
async def list_conversations(
    dashboard: Ctx,
    channel: Annotated[str | None, Query(max_length=32)] = None,
    status: Annotated[MessageStatus | None, Query()] = None,
    before: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=store.MAX_CONVERSATIONS)] = 50,
) -> dict[str, Any]:
    """Messages newest first (`before`: those received earlier, for the next page), each
    with its routes, the sessions they ran and the reply sent back."""
    name = _switchboard(dashboard)
    rows = await dashboard.db.read(
        name, lambda pool: store.conversations(pool, limit, before, channel, status)
    )
    routes = await dashboard.db.read(
        name, lambda pool: store.routes_of(pool, [r.request_id for r in rows])
    )
    by_message: dict[uuid.UUID, list[store.RouteShown]] = defaultdict(list)
    for route in routes:
        if route.request_id is not None:
            by_message[route.request_id].append(route)
    sessions = await _sessions(dashboard, routes)
    data = [_conversation(name, r, by_message[r.request_id], sessions) for r in rows]
    return ok(data)


@router.post(
    "/api/conversations/messages", response_model=ApiResponse[OwnerMessageSent], status_code=202
)
async def send_as_owner(body: OwnerMessage, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Write to the butlers as the owner: the message enters the switchboard like a
    channel's (channel `dashboard`), is classified and routed, and its answer is shown
    in its conversation (audited)."""
    info = dashboard.butler(_switchboard(dashboard))
    who = actor(request)
    event_id = str(uuid.uuid4())
    envelope = {
        "schema_version": "ingest.v1",
        "source": {"channel": "dashboard", "provider": "web", "endpoint_identity": "dashboard"},
        "event": {
            "external_event_id": event_id,
            "external_thread_id": f"dashboard:{who}"[:256],
            "observed_at": datetime.now(UTC).isoformat(),
        },
        "sender": {"identity": who[:256]},
        "payload": {"text": body.text},
    }
    outcome = await dashboard.write(
        request, info, "message.send", "ingest_v1", {"envelope": envelope}, target=event_id
    )
    data = outcome.data if isinstance(outcome.data, dict) else {}
    return ok(
        OwnerMessageSent(
            request_id=str(data.get("request_id")),
            status=str(data.get("status")),
            duplicate=bool(data.get("duplicate")),
        )
    )


@router.get("/api/connectors", response_model=ApiResponse[list[ConnectorHealth]])
async def connectors(dashboard: Ctx) -> dict[str, Any]:
    """Each inbound channel connector (Telegram, e-mail): mode, cursor, backlog, last
    poll, errors, and whether it is `ok`, `failing`, `stalled` or `starting`."""
    read = await connector_health(dashboard)
    return ok(read.connectors, failed_butlers=read.failed_butlers)
