"""The switchboard module's tables: its registry, inbox and routing log."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.context import Ctx
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok
from butlers.dashboard.modules.common import module_page
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import Where, row_json

router = APIRouter(tags=["switchboard"])
MODULE = "switchboard"
STALE_AFTER_SECONDS = 60


class RegistryEntry(BaseModel):
    butler: str  # the switchboard that holds the entry
    name: str
    description: str
    url: str
    hints: list[str]
    modules: list[str]
    registered_at: datetime
    last_seen_at: datetime
    alive: bool


class InboxMessage(BaseModel):
    butler: str
    id: str
    channel: str
    provider: str
    sender: str
    text: str
    status: str
    # True when the classification was unusable and the message went to the fallback
    # butler; the reason holds why, with the start of the classifier's answer.
    fallback: bool | None
    classification_reason: str | None
    trace_id: str | None
    received_at: datetime
    completed_at: datetime | None


class Route(BaseModel):
    butler: str
    id: str
    request_id: str | None
    target: str
    segment: str | None
    status: str
    session_id: str | None
    error: str | None
    duration_ms: int
    trace_id: str | None
    created_at: datetime


@router.get("/api/switchboard/registry", response_model=ApiResponse[list[RegistryEntry]])
async def registry(dashboard: Ctx) -> dict[str, Any]:
    """Butlers registered with the switchboard and whether their heartbeat is recent."""
    fan = await dashboard.db.fan_out(
        "SELECT name, description, url, hints, modules, registered_at, last_seen_at, "
        "last_seen_at > clock_timestamp() - make_interval(secs => $1) AS alive "
        "FROM butler_registry ORDER BY name",
        STALE_AFTER_SECONDS,
        butler_names=dashboard.with_module(MODULE),
    )
    entries = [RegistryEntry(butler=n, **row_json(r)) for n, r in fan.rows()]
    return ok(entries, failed_butlers=fan.failed_butlers)


@router.get("/api/switchboard/messages", response_model=PaginatedResponse[InboxMessage])
async def messages(
    dashboard: Ctx,
    status: Literal["accepted", "classified", "dispatched", "partial", "failed"] | None = None,
    fallback: bool | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Incoming messages, newest first; `fallback=true`: those whose classification was
    unusable (routed to the fallback butler), with the reason."""
    body = await module_page(
        dashboard,
        MODULE,
        table="message_inbox",
        columns="request_id AS id, channel, provider, sender, left(text, 500) AS text, status, "
        "(classification->>'fallback')::boolean AS fallback, "
        "left(classification->>'reason', 500) AS classification_reason, "
        "trace_id, received_at, completed_at",
        order_key="received_at",
        where=Where()
        .when(status, "status = {}")
        .when(fallback, "coalesce((classification->>'fallback')::boolean, false) = {}"),
        offset=offset,
        limit=limit,
    )
    return body


@router.get("/api/switchboard/routing-log", response_model=PaginatedResponse[Route])
async def routing_log(
    dashboard: Ctx,
    target: str | None = None,
    status: Literal["success", "error", "timeout", "target_unavailable"] | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Every route of every message, newest first."""
    where = Where().when(target, "butler = {}").when(status, "status = {}")
    return await module_page(
        dashboard,
        MODULE,
        table="routing_log",
        columns="route_id AS id, request_id, butler AS target, segment, status, session_id, "
        "error, duration_ms, trace_id, created_at",
        order_key="created_at",
        where=where,
        offset=offset,
        limit=limit,
    )
