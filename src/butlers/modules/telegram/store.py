"""SQL of the telegram connector: its cursor and health, and the updates it handed over.

`connector_health` is the dashboard's read (the overview and the Issues page)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from butlers.modules.view import Reader
from butlers.stores.records import Record, expression


@dataclass(frozen=True, slots=True)
class Cursor(Record):
    bot: str
    next_offset: int
    last_poll_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None


@dataclass(frozen=True, slots=True)
class Handed(Record):
    """One update as the connector handed it over (or skipped it)."""

    update_id: int
    event_id: str | None
    chat_id: str | None
    sender: str | None
    kind: str
    request_id: uuid.UUID | None
    outcome: str
    detail: str | None
    received_at: datetime


@dataclass(frozen=True, slots=True)
class ConnectorHealth(Record):
    """The connector of one bot: where it is and whether it works."""

    bot: str
    mode: str
    next_offset: int
    backlog: int
    errors: int
    last_poll_at: datetime | None
    last_ok_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    handed: int = field(
        metadata=expression("(SELECT count(*) FROM telegram_updates u WHERE u.bot = c.bot)")
    )


async def connector_health(reader: Reader) -> list[ConnectorHealth]:
    rows = await reader.fetch(
        f"SELECT {ConnectorHealth.columns()} FROM telegram_cursor c ORDER BY bot LIMIT 20"
    )
    return [ConnectorHealth.from_row(r) for r in rows]


class TelegramStore:
    def __init__(self, pool: asyncpg.Pool, bot: str) -> None:
        self._pool = pool
        self._bot = bot

    async def cursor(self, mode: str | None = None) -> Cursor:
        """The bot's cursor (created at offset 0); `mode` records how updates arrive."""
        row = await self._pool.fetchrow(
            "INSERT INTO telegram_cursor (bot, mode) VALUES ($1, coalesce($2, 'poll')) "
            "ON CONFLICT (bot) DO UPDATE SET mode = coalesce($2, telegram_cursor.mode) "
            f"RETURNING {Cursor.columns()}",
            self._bot,
            mode,
        )
        return Cursor.from_row(row)

    async def polled(self, error: str | None, mode: str = "poll") -> None:
        """One poll (or webhook delivery) done: it worked (`error` None) or failed."""
        await self._pool.execute(
            "UPDATE telegram_cursor SET last_poll_at = clock_timestamp(), mode = $3, "
            "last_error = coalesce($2, last_error), "
            "last_ok_at = CASE WHEN $2::text IS NULL THEN clock_timestamp() ELSE last_ok_at END, "
            "errors = errors + CASE WHEN $2::text IS NULL THEN 0 ELSE 1 END, "
            "backlog = CASE WHEN $2::text IS NULL THEN 0 ELSE backlog END, "
            "last_error_at = CASE WHEN $2::text IS NULL THEN last_error_at "
            "ELSE clock_timestamp() END WHERE bot = $1",
            self._bot,
            error,
            mode,
        )

    async def receiving(self, backlog: int) -> None:
        """Updates received and not handed over yet."""
        await self._pool.execute(
            "UPDATE telegram_cursor SET backlog = $2 WHERE bot = $1", self._bot, backlog
        )

    async def seen(self, update_id: int) -> bool:
        """Whether this update was handed over already (webhook repeats)."""
        value = await self._pool.fetchval(
            "SELECT 1 FROM telegram_updates WHERE bot = $1 AND update_id = $2",
            self._bot,
            update_id,
        )
        return value is not None

    async def handed(
        self,
        update_id: int,
        *,
        event_id: str | None,
        chat_id: str | None,
        sender: str | None,
        kind: str,
        request_id: uuid.UUID | None,
        outcome: str,
        detail: str | None,
    ) -> None:
        """Record the update and move the cursor past it, in one transaction."""
        fields = {"event_id": event_id, "chat_id": chat_id, "sender": sender, "kind": kind,
                  "request_id": request_id, "outcome": outcome, "detail": detail}  # fmt: skip
        await self.handed_batch([(update_id, fields)])

    async def handed_batch(self, updates: list[tuple[int, dict[str, Any]]]) -> None:
        """Record a batch of updates (`update_id`, then `event_id`, `chat_id`, `sender`,
        `kind`, `request_id`, `outcome`, `detail`) and move the cursor past the last,
        in one transaction: one round of statements for a whole long-poll batch."""
        if not updates:
            return
        rows = [
            (
                self._bot,
                update_id,
                f["event_id"],
                f["chat_id"],
                f["sender"],
                f["kind"],
                f["request_id"],
                f["outcome"],
                f["detail"],
            )
            for update_id, f in updates
        ]
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                "INSERT INTO telegram_updates (bot, update_id, event_id, chat_id, sender, kind, "
                "request_id, outcome, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                "ON CONFLICT (bot, update_id) DO NOTHING",
                rows,
            )
            await conn.execute(
                "UPDATE telegram_cursor SET next_offset = greatest(next_offset, $2), "
                "updated_at = clock_timestamp() WHERE bot = $1",
                self._bot,
                max(update_id for update_id, _ in updates) + 1,
            )

    async def recent(self, limit: int) -> list[Handed]:
        rows = await self._pool.fetch(
            f"SELECT {Handed.columns()} FROM telegram_updates WHERE bot = $1 "
            "ORDER BY received_at DESC, update_id DESC LIMIT $2",
            self._bot,
            limit,
        )
        return [Handed.from_row(r) for r in rows]
