"""Notifications: the messenger's delivery log (every attempt and its outcome)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok, page
from butlers.dashboard.module_views import listing_page
from butlers.dashboard.pagination import Limit, Offset
from butlers.modules.messenger import store
from butlers.modules.messenger.store import DELIVERIES

router = APIRouter(tags=["notifications"])
# being sent (a reply, claimed) | sent | failed by the channel | held for the owner's
# approval | refused (not sent)
DeliveryStatus = Literal["sending", "sent", "failed", "held", "refused"]
MODULE = "messenger"


class Notification(BaseModel):
    id: str
    butler: str
    channel: str
    recipient: str | None
    subject: str | None
    body: str
    status: DeliveryStatus
    error: str | None
    provider_message_id: str | None
    tool: str | None
    created_at: datetime
    attempts: int = 1
    # attempts a crash cut off mid-send, then sent again (the owner may have it twice)
    interrupted: int = 0


class ChannelStats(BaseModel):
    sending: int = 0
    sent: int = 0
    failed: int = 0
    held: int = 0
    refused: int = 0


class NotificationStats(BaseModel):
    total: int
    sending: int
    sent: int
    failed: int
    held: int
    refused: int
    last_24h: int
    failed_24h: int
    by_channel: dict[str, ChannelStats]
    last_failure_at: datetime | None
    last_failure: str | None


async def _list(
    dashboard: Dashboard,
    names: list[str],
    channel: str | None,
    status: str | None,
    since: datetime | None,
    offset: int,
    limit: int,
) -> dict[str, Any]:
    return await listing_page(
        dashboard,
        DELIVERIES,
        names,
        {"channel": channel, "status": status, "since": since},
        offset=offset,
        limit=limit,
        build=lambda n, row: Notification(**{**dict(row), "id": str(row["id"]), "butler": n}),
    )


Channel = Annotated[str | None, Query(max_length=50)]


@router.get("/api/notifications", response_model=PaginatedResponse[Notification])
async def notifications(
    dashboard: Ctx,
    channel: Channel = None,
    status: DeliveryStatus | None = None,
    since: datetime | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Deliveries of every butler with the messenger module, newest first."""
    names = dashboard.with_module(MODULE)
    return await _list(dashboard, names, channel, status, since, offset, limit)


@router.get("/api/notifications/stats", response_model=ApiResponse[NotificationStats])
async def notification_stats(dashboard: Ctx) -> dict[str, Any]:
    day_ago = datetime.now(UTC) - timedelta(days=1)
    names = dashboard.with_module(MODULE)
    fan, last_failures = await asyncio.gather(
        dashboard.db.fan_read(lambda pool: store.delivery_counts(pool, day_ago), names),
        dashboard.db.fan_read(store.last_failure, names),
    )
    by_channel: dict[str, ChannelStats] = {}
    totals = {"sending": 0, "sent": 0, "failed": 0, "held": 0, "refused": 0}
    recent = failed_recent = 0
    for _name, rows in fan.items():
        for row in rows:
            channel = by_channel.setdefault(row.channel, ChannelStats())
            setattr(channel, row.status, getattr(channel, row.status) + row.n)
            totals[row.status] += row.n
            recent += row.recent
            failed_recent += row.recent if row.status == "failed" else 0
    failures = [f for _n, f in last_failures.items() if f is not None]
    latest = max(failures, key=lambda f: f.created_at, default=None)
    stats = NotificationStats(
        total=sum(totals.values()),
        sending=totals["sending"],
        sent=totals["sent"],
        failed=totals["failed"],
        held=totals["held"],
        refused=totals["refused"],
        last_24h=recent,
        failed_24h=failed_recent,
        by_channel=by_channel,
        last_failure_at=latest.created_at if latest else None,
        last_failure=latest.error if latest else None,
    )
    return ok(stats, failed_butlers=sorted({*fan.failed, *last_failures.failed}))


@router.get("/api/butlers/{name}/notifications", response_model=PaginatedResponse[Notification])
async def butler_notifications(
    name: str,
    dashboard: Ctx,
    channel: Channel = None,
    status: DeliveryStatus | None = None,
    since: datetime | None = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> dict[str, Any]:
    """One butler's deliveries (empty, with `meta.supported: false`, without the messenger)."""
    info = dashboard.butler(name)
    if MODULE not in info.modules:
        return page(
            [],
            total=0,
            offset=offset,
            limit=limit,
            supported=False,
            reason=f"butler {name!r} does not enable the messenger module",
        )
    return await _list(dashboard, [name], channel, status, since, offset, limit)
