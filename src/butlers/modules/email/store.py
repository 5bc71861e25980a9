"""The inbound connector's tables: its cursor and health per folder, and refused messages.

`email_inbound` holds one row per (mailbox, folder): the cursor (UIDVALIDITY and the
last UID the switchboard accepted) and the connector's health (last poll, backlog,
errors). `inbound_health` is the read the dashboard uses.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from butlers.modules.view import Reader
from butlers.stores.records import Record


@dataclass(frozen=True, slots=True)
class Cursor(Record):
    uidvalidity: int
    last_uid: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class InboundHealth(Record):
    mailbox: str
    folder: str
    uidvalidity: int
    last_uid: int
    idle: bool | None
    backlog: int
    accepted: int
    errors: int
    last_error: str | None
    last_error_at: datetime | None
    last_poll_at: datetime | None
    last_accepted_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Refused(Record):
    id: uuid.UUID
    mailbox: str
    folder: str
    uidvalidity: int
    uid: int
    message_id: str | None
    sender: str | None
    subject: str | None
    error: str
    created_at: datetime


async def inbound_health(reader: Reader) -> list[InboundHealth]:
    """Each folder the connector reads, with its cursor and health."""
    rows = await reader.fetch(
        f"SELECT {InboundHealth.columns()} FROM email_inbound ORDER BY mailbox, folder LIMIT 100"
    )
    return [InboundHealth.from_row(r) for r in rows]


async def refused_messages(reader: Reader, limit: int = 50) -> list[Refused]:
    rows = await reader.fetch(
        f"SELECT {Refused.columns()} FROM email_inbound_refused ORDER BY created_at DESC LIMIT $1",
        limit,
    )
    return [Refused.from_row(r) for r in rows]


class InboundStore:
    def __init__(self, pool: asyncpg.Pool, mailbox: str, folder: str) -> None:
        self._pool = pool
        self.mailbox = mailbox
        self.folder = folder

    async def cursor(self) -> Cursor | None:
        row = await self._pool.fetchrow(
            f"SELECT {Cursor.columns()} FROM email_inbound WHERE mailbox = $1 AND folder = $2",
            self.mailbox,
            self.folder,
        )
        return Cursor.from_row(row) if row else None

    async def reset(self, uidvalidity: int, last_uid: int) -> None:
        """Start (or restart, after a UIDVALIDITY change) the cursor at `last_uid`."""
        await self._pool.execute(
            """
            INSERT INTO email_inbound (mailbox, folder, uidvalidity, last_uid)
            VALUES ($1, $2, $3, $4)
            ON CONFLICT (mailbox, folder) DO UPDATE
               SET uidvalidity = $3, last_uid = $4, updated_at = clock_timestamp()
            """,
            self.mailbox,
            self.folder,
            uidvalidity,
            last_uid,
        )

    async def advance(self, uidvalidity: int, uid: int, accepted: bool) -> None:
        """The message `uid` is handed off: the cursor moves past it (never back)."""
        await self._pool.execute(
            """
            UPDATE email_inbound
               SET last_uid = GREATEST(last_uid, $4), backlog = GREATEST(backlog - 1, 0),
                   accepted = accepted + CASE WHEN $5::boolean THEN 1 ELSE 0 END,
                   last_accepted_at = CASE WHEN $5::boolean THEN clock_timestamp()
                                           ELSE last_accepted_at END,
                   updated_at = clock_timestamp()
             WHERE mailbox = $1 AND folder = $2 AND uidvalidity = $3
            """,
            self.mailbox,
            self.folder,
            uidvalidity,
            uid,
            accepted,
        )

    async def polled(self, backlog: int, idle: bool) -> None:
        await self._pool.execute(
            """
            UPDATE email_inbound SET last_poll_at = clock_timestamp(), backlog = $3, idle = $4
             WHERE mailbox = $1 AND folder = $2
            """,
            self.mailbox,
            self.folder,
            backlog,
            idle,
        )

    async def failed(self, error: str) -> None:
        await self._pool.execute(
            """
            UPDATE email_inbound
               SET errors = errors + 1, last_error = left($3, 2000),
                   last_error_at = clock_timestamp()
             WHERE mailbox = $1 AND folder = $2
            """,
            self.mailbox,
            self.folder,
            error,
        )

    async def refuse(
        self,
        uidvalidity: int,
        uid: int,
        message_id: str | None,
        sender: str | None,
        subject: str | None,
        error: str,
    ) -> None:
        """A message the switchboard refused for good: kept here, then passed over."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                """
                INSERT INTO email_inbound_refused
                    (mailbox, folder, uidvalidity, uid, message_id, sender, subject, error)
                VALUES ($1, $2, $3, $4, $5, $6, left($7, 998), left($8, 2000))
                """,
                self.mailbox,
                self.folder,
                uidvalidity,
                uid,
                message_id,
                sender,
                subject,
                error,
            )
            await conn.execute(
                """
                UPDATE email_inbound
                   SET last_uid = GREATEST(last_uid, $4), errors = errors + 1,
                       last_error = left($5, 2000), last_error_at = clock_timestamp(),
                       updated_at = clock_timestamp()
                 WHERE mailbox = $1 AND folder = $2 AND uidvalidity = $3
                """,
                self.mailbox,
                self.folder,
                uidvalidity,
                uid,
                error,
            )
