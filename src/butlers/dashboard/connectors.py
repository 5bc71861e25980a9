"""Health of the inbound channel connectors (Telegram, e-mail) on every butler that
runs one: where each is (cursor, backlog), when it last polled, and whether it is
failing (its last attempt failed) or stalled (no attempt for too long).

Read from the channel modules' stores; shown on the overview, on the Conversations
page and, when not `ok`, as an entry of the Issues page.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel

from butlers.dashboard.context import Dashboard
from butlers.modules.email import store as email_store
from butlers.modules.telegram import store as telegram_store

# No poll for this long is a stalled connector (long polls last at most 50 s; an
# IDLE session is renewed within 29 minutes, RFC 2177).
STALLED_AFTER = {"telegram": timedelta(minutes=10), "email": timedelta(minutes=35)}

State = Literal["ok", "failing", "stalled", "starting"]


class ConnectorHealth(BaseModel):
    butler: str
    channel: Literal["telegram", "email"]
    name: str  # the bot's username, or mailbox/folder
    mode: str  # poll | webhook (telegram); idle | polling (e-mail)
    state: State
    reason: str | None
    cursor: str
    backlog: int
    errors: int
    handed_over: int
    last_poll_at: datetime | None
    last_ok_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None


class ConnectorsRead(BaseModel):
    connectors: list[ConnectorHealth]
    failed_butlers: list[str]


def _state(
    channel: str,
    mode: str,
    last_ok_at: datetime | None,
    last_error_at: datetime | None,
    last_error: str | None,
    now: datetime,
) -> tuple[State, str | None]:
    if last_error_at is not None and (last_ok_at is None or last_error_at >= last_ok_at):
        return "failing", last_error or "its last attempt failed"
    last = max((t for t in (last_ok_at, last_error_at) if t is not None), default=None)
    if last is None:
        return "starting", "no poll yet"
    if mode != "webhook" and now - last > STALLED_AFTER[channel]:
        minutes = int((now - last).total_seconds() // 60)
        return "stalled", f"no poll for {minutes} min"
    return "ok", None


async def connector_health(dashboard: Dashboard) -> ConnectorsRead:
    """Every connector of every butler that runs a channel module with inbound on."""
    telegram, email = await asyncio.gather(
        dashboard.db.fan_read(telegram_store.connector_health, dashboard.with_module("telegram")),
        dashboard.db.fan_read(email_store.inbound_health, dashboard.with_module("email")),
    )
    now = datetime.now(UTC)
    found: list[ConnectorHealth] = []
    for butler, bot in telegram.rows():
        state, reason = _state(
            "telegram", bot.mode, bot.last_ok_at, bot.last_error_at, bot.last_error, now
        )
        found.append(
            ConnectorHealth(
                butler=butler,
                channel="telegram",
                name=f"@{bot.bot}",
                mode=bot.mode,
                state=state,
                reason=reason,
                cursor=f"offset {bot.next_offset}",
                backlog=bot.backlog,
                errors=bot.errors,
                handed_over=bot.handed,
                last_poll_at=bot.last_poll_at,
                last_ok_at=bot.last_ok_at,
                last_error=bot.last_error,
                last_error_at=bot.last_error_at,
            )
        )
    for butler, folder in email.rows():
        mode = "polling" if folder.idle is False else "idle"
        state, reason = _state(
            "email", mode, folder.last_poll_at, folder.last_error_at, folder.last_error, now
        )
        found.append(
            ConnectorHealth(
                butler=butler,
                channel="email",
                name=f"{folder.mailbox}/{folder.folder}",
                mode=mode,
                state=state,
                reason=reason,
                cursor=f"UIDVALIDITY {folder.uidvalidity}, UID {folder.last_uid}",
                backlog=folder.backlog,
                errors=folder.errors,
                handed_over=folder.accepted,
                last_poll_at=folder.last_poll_at,
                last_ok_at=folder.last_poll_at,
                last_error=folder.last_error,
                last_error_at=folder.last_error_at,
            )
        )
    failed = sorted({*telegram.failed, *email.failed})
    return ConnectorsRead(connectors=found, failed_butlers=failed)
