"""Queries over the contacts tables."""

import uuid
from datetime import date, datetime
from typing import Any

import asyncpg

from butlers.db.pool import dumps
from butlers.db.sql import affected, like_contains

CONTACT = "id, name, email, phone, birthday, details, created_at, updated_at"
EDITABLE = ("name", "email", "phone", "birthday", "details")


class ContactStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(
        self,
        name: str,
        email: str | None,
        phone: str | None,
        birthday: date | None,
        details: dict[str, Any],
    ) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            f"INSERT INTO contacts (name, email, phone, birthday, details) "
            f"VALUES ($1, $2, $3, $4, $5::text::jsonb) RETURNING {CONTACT}",
            name,
            email,
            phone,
            birthday,
            dumps(details),
        )
        return dict(row)

    async def update(self, contact_id: uuid.UUID, changes: dict[str, Any]) -> dict[str, Any] | None:
        sets: list[str] = []
        args: list[Any] = [contact_id]
        for column in EDITABLE:
            if column in changes:
                args.append(dumps(changes[column]) if column == "details" else changes[column])
                cast = "::text::jsonb" if column == "details" else ""
                sets.append(f"{column} = ${len(args)}{cast}")
        row = await self._pool.fetchrow(
            f"UPDATE contacts SET {', '.join([*sets, 'updated_at = clock_timestamp()'])} "
            f"WHERE id = $1 RETURNING {CONTACT}",
            *args,
        )
        return dict(row) if row else None

    async def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            f"SELECT {CONTACT} FROM contacts WHERE name ILIKE $1 ESCAPE '\\' "
            "OR email ILIKE $1 ESCAPE '\\' OR phone ILIKE $1 ESCAPE '\\' "
            "ORDER BY lower(name) LIMIT $2",
            like_contains(query),
            limit,
        )
        return [dict(row) for row in rows]

    async def get(self, contact_id: uuid.UUID) -> dict[str, Any] | None:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(f"SELECT {CONTACT} FROM contacts WHERE id = $1", contact_id)
            if row is None:
                return None
            notes = await conn.fetch(
                "SELECT id, body, created_at FROM contact_notes WHERE contact_id = $1 "
                "ORDER BY created_at DESC",
                contact_id,
            )
            interactions = await conn.fetch(
                "SELECT id, kind, summary, occurred_at FROM interactions WHERE contact_id = $1 "
                "ORDER BY occurred_at DESC",
                contact_id,
            )
        return dict(row) | {
            "notes": [dict(n) for n in notes],
            "interactions": [dict(i) for i in interactions],
        }

    async def delete(self, contact_id: uuid.UUID) -> bool:
        status = await self._pool.execute("DELETE FROM contacts WHERE id = $1", contact_id)
        return affected(status) > 0

    async def add_note(self, contact_id: uuid.UUID, body: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            "INSERT INTO contact_notes (contact_id, body) SELECT id, $2 FROM contacts "
            "WHERE id = $1 RETURNING id, contact_id, body, created_at",
            contact_id,
            body,
        )
        return dict(row) if row else None

    async def log_interaction(
        self, contact_id: uuid.UUID, kind: str, summary: str | None, occurred_at: datetime | None
    ) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            "INSERT INTO interactions (contact_id, kind, summary, occurred_at) "
            "SELECT id, $2, $3, COALESCE($4, clock_timestamp()) FROM contacts WHERE id = $1 "
            "RETURNING id, contact_id, kind, summary, occurred_at",
            contact_id,
            kind,
            summary,
            occurred_at,
        )
        return dict(row) if row else None
