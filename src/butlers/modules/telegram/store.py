"""SQL of the telegram connector: its cursor and the updates it handed over."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from butlers.stores.records import Record


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


class TelegramStore:
    def __init__(self, pool: asyncpg.Pool, bot: str) -> None:
        self._pool = pool
        self._bot = bot

    async def cursor(self) -> Cursor:
        row = await self._pool.fetchrow(
            "INSERT INTO telegram_cursor (bot) VALUES ($1) "
            "ON CONFLICT (bot) DO UPDATE SET bot = EXCLUDED.bot "
            f"RETURNING {Cursor.columns()}",
            self._bot,
        )
        return Cursor.from_row(row)

    async def polled(self, error: str | None) -> None:
        await self._pool.execute(
            "UPDATE telegram_cursor SET last_poll_at = clock_timestamp(), "
            "last_error = coalesce($2, last_error), "
            "last_error_at = CASE WHEN $2::text IS NULL THEN last_error_at "
            "ELSE clock_timestamp() END WHERE bot = $1",
            self._bot,
            error,
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
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO telegram_updates (bot, update_id, event_id, chat_id, sender, kind, "
                "request_id, outcome, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                "ON CONFLICT (bot, update_id) DO NOTHING",
                self._bot,
                update_id,
                event_id,
                chat_id,
                sender,
                kind,
                request_id,
                outcome,
                detail,
            )
            await conn.execute(
                "UPDATE telegram_cursor SET next_offset = greatest(next_offset, $2), "
                "updated_at = clock_timestamp() WHERE bot = $1",
                self._bot,
                update_id + 1,
            )

    async def recent(self, limit: int) -> list[Handed]:
        rows = await self._pool.fetch(
            f"SELECT {Handed.columns()} FROM telegram_updates WHERE bot = $1 "
            "ORDER BY received_at DESC, update_id DESC LIMIT $2",
            self._bot,
            limit,
        )
        return [Handed.from_row(r) for r in rows]
