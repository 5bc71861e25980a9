"""Queries over the contacts tables, returning typed records (their fields are the columns)."""

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.db.sql import affected, like_contains
from butlers.modules.briefing import MAX_LINES, day_bounds
from butlers.modules.view import Clause, Listing, Reader
from butlers.stores.records import Record


@dataclass(frozen=True, slots=True)
class Contact(Record):
    id: uuid.UUID
    name: str
    email: str | None
    phone: str | None
    birthday: date | None
    details: dict[str, JsonValue]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Note(Record):
    id: uuid.UUID
    contact_id: uuid.UUID
    body: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Interaction(Record):
    id: uuid.UUID
    contact_id: uuid.UUID
    kind: str
    summary: str | None
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class ContactDetail(Record):
    """A contact with its notes and interactions, newest first (`contact_get`)."""

    id: uuid.UUID
    name: str
    email: str | None
    phone: str | None
    birthday: date | None
    details: JsonValue
    created_at: datetime
    updated_at: datetime
    notes: tuple[Note, ...]
    interactions: tuple[Interaction, ...]


@dataclass(frozen=True, slots=True)
class NoteShown(Record):
    id: uuid.UUID
    body: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class InteractionShown(Record):
    id: uuid.UUID
    kind: str
    summary: str | None
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class ContactShown(Record):
    """A contact with its latest notes and interactions (the dashboard's detail)."""

    id: uuid.UUID
    name: str
    email: str | None
    phone: str | None
    birthday: date | None
    details: dict[str, JsonValue]
    created_at: datetime
    updated_at: datetime
    notes: tuple[NoteShown, ...]
    interactions: tuple[InteractionShown, ...]


CONTACT = Contact.columns()
SHOWN_ITEMS = 200  # notes and interactions of a contact shown, each
# The dashboard's read (`views.py`): newest first, `q` matches name or email literally.
CONTACTS = Listing(
    "contacts",
    Contact,
    order_key="created_at",
    order_sql="created_at DESC, id DESC",
    clauses={"q": Clause("(name ILIKE {} ESCAPE '\\' OR email ILIKE {} ESCAPE '\\')", "contains")},
)


async def contact_shown(db: Reader, contact_id: uuid.UUID) -> ContactShown | None:
    rows = await db.fetch(f"SELECT {CONTACT} FROM contacts WHERE id = $1", contact_id)
    if not rows:
        return None
    notes = await db.fetch(
        f"SELECT {NoteShown.columns()} FROM contact_notes WHERE contact_id = $1 "
        f"ORDER BY created_at DESC LIMIT {SHOWN_ITEMS}",
        contact_id,
    )
    interactions = await db.fetch(
        f"SELECT {InteractionShown.columns()} FROM interactions WHERE contact_id = $1 "
        f"ORDER BY occurred_at DESC LIMIT {SHOWN_ITEMS}",
        contact_id,
    )
    return ContactShown.from_row(
        {
            **dict(rows[0]),
            "notes": tuple(NoteShown.from_row(n) for n in notes),
            "interactions": tuple(InteractionShown.from_row(i) for i in interactions),
        }
    )


EDITABLE = ("name", "email", "phone", "birthday", "details")


FOLLOW_UP_AFTER_DAYS = 30


class ContactStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def briefing(self, day: date, tz: ZoneInfo) -> list[str]:
        """The morning briefing's lines: birthdays today and in the coming week, and
        follow-ups (contacts whose last interaction is FOLLOW_UP_AFTER_DAYS days old)."""
        start, _ = day_bounds(day, tz)
        birthdays = await self._pool.fetch(
            "SELECT name, birthday, ((make_date($1, extract(month FROM birthday)::int, 1) "
            "+ (extract(day FROM birthday)::int - 1)) - $2::date + 365) % 365 AS days "
            "FROM contacts WHERE birthday IS NOT NULL ORDER BY days, name",
            day.year,
            day,
        )
        lines = [
            f"birthday: {r['name']} " + ("today" if r["days"] == 0 else f"in {r['days']} days")
            for r in birthdays
            if r["days"] <= 7
        ][:MAX_LINES]
        stale = await self._pool.fetch(
            "SELECT c.name, max(i.occurred_at) AS last FROM contacts c "
            "JOIN interactions i ON i.contact_id = c.id GROUP BY c.id "
            "HAVING max(i.occurred_at) < $1 ORDER BY max(i.occurred_at) LIMIT $2",
            start - timedelta(days=FOLLOW_UP_AFTER_DAYS),
            MAX_LINES - len(lines),
        )
        lines += [f"follow up: {r['name']} (last contact {r['last']:%Y-%m-%d})" for r in stale]
        return lines

    async def add(
        self,
        name: str,
        email: str | None,
        phone: str | None,
        birthday: date | None,
        details: dict[str, Any],
    ) -> Contact:
        row = await self._pool.fetchrow(
            f"INSERT INTO contacts (name, email, phone, birthday, details) "
            f"VALUES ($1, $2, $3, $4, $5::text::jsonb) RETURNING {CONTACT}",
            name,
            email,
            phone,
            birthday,
            dumps(details),
        )
        return Contact.from_row(row)

    async def update(self, contact_id: uuid.UUID, changes: dict[str, Any]) -> Contact | None:
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
        return Contact.from_row(row) if row else None

    async def search(self, query: str, limit: int) -> list[Contact]:
        rows = await self._pool.fetch(
            f"SELECT {CONTACT} FROM contacts WHERE name ILIKE $1 ESCAPE '\\' "
            "OR email ILIKE $1 ESCAPE '\\' OR phone ILIKE $1 ESCAPE '\\' "
            "ORDER BY lower(name) LIMIT $2",
            like_contains(query),
            limit,
        )
        return [Contact.from_row(row) for row in rows]

    async def get(self, contact_id: uuid.UUID) -> ContactDetail | None:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(f"SELECT {CONTACT} FROM contacts WHERE id = $1", contact_id)
            if row is None:
                return None
            notes = await conn.fetch(
                f"SELECT {Note.columns()} FROM contact_notes WHERE contact_id = $1 "
                "ORDER BY created_at DESC",
                contact_id,
            )
            interactions = await conn.fetch(
                f"SELECT {Interaction.columns()} FROM interactions WHERE contact_id = $1 "
                "ORDER BY occurred_at DESC",
                contact_id,
            )
        return ContactDetail.from_row(
            {
                **dict(row),
                "notes": tuple(Note.from_row(n) for n in notes),
                "interactions": tuple(Interaction.from_row(i) for i in interactions),
            }
        )

    async def delete(self, contact_id: uuid.UUID) -> bool:
        status = await self._pool.execute("DELETE FROM contacts WHERE id = $1", contact_id)
        return affected(status) > 0

    async def add_note(self, contact_id: uuid.UUID, body: str) -> Note | None:
        row = await self._pool.fetchrow(
            "INSERT INTO contact_notes (contact_id, body) SELECT id, $2 FROM contacts "
            f"WHERE id = $1 RETURNING {Note.columns()}",
            contact_id,
            body,
        )
        return Note.from_row(row) if row else None

    async def log_interaction(
        self, contact_id: uuid.UUID, kind: str, summary: str | None, occurred_at: datetime | None
    ) -> Interaction | None:
        row = await self._pool.fetchrow(
            "INSERT INTO interactions (contact_id, kind, summary, occurred_at) "
            "SELECT id, $2, $3, COALESCE($4, clock_timestamp()) FROM contacts WHERE id = $1 "
            f"RETURNING {Interaction.columns()}",
            contact_id,
            kind,
            summary,
            occurred_at,
        )
        return Interaction.from_row(row) if row else None
