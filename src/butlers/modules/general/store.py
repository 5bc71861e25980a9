"""Queries over the general tables (collections and their notes), returning typed records."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.db.sql import affected, like_contains
from butlers.modules.view import Clause, Listing
from butlers.stores.records import Record, expression


@dataclass(frozen=True, slots=True)
class Collection(Record):
    id: uuid.UUID
    name: str
    description: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class CollectionCounted(Record):
    """A collection with its number of notes (`collection_list`)."""

    id: uuid.UUID
    name: str
    description: str | None
    notes: int


@dataclass(frozen=True, slots=True)
class CollectionShown(Record):
    """A collection as the dashboard lists it."""

    id: uuid.UUID = field(metadata=expression("c.id"))
    name: str = field(metadata=expression("c.name"))
    description: str | None = field(metadata=expression("c.description"))
    notes: int = field(
        metadata=expression("(SELECT count(*) FROM notes n WHERE n.collection_id = c.id)")
    )
    created_at: datetime = field(metadata=expression("c.created_at"))


@dataclass(frozen=True, slots=True)
class Note(Record):
    id: uuid.UUID = field(metadata=expression("n.id"))
    collection: str = field(metadata=expression("c.name"))
    title: str = field(metadata=expression("n.title"))
    body: str = field(metadata=expression("n.body"))
    data: dict[str, JsonValue] = field(metadata=expression("n.data"))
    tags: list[str] = field(metadata=expression("n.tags"))
    created_at: datetime = field(metadata=expression("n.created_at"))


@dataclass(frozen=True, slots=True)
class NoteAdded(Record):
    collection: str
    title: str
    id: uuid.UUID
    created_at: datetime


NOTES_OF = "notes n JOIN collections c ON c.id = n.collection_id"
# The dashboard's reads (`views.py`).
COLLECTIONS = Listing(
    "collections c", CollectionShown, order_key="name", order_sql="c.name", paged=False
)
NOTES = Listing(
    NOTES_OF,
    Note,
    order_key="created_at",
    order_sql="n.created_at DESC, n.id DESC",
    clauses={"collection": Clause("c.name = {}")},
)


class GeneralStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create_collection(self, name: str, description: str | None) -> Collection:
        row = await self._pool.fetchrow(
            "INSERT INTO collections (name, description) VALUES ($1, $2) "
            "ON CONFLICT (name) DO UPDATE SET description = "
            "COALESCE(EXCLUDED.description, collections.description) "
            f"RETURNING {Collection.columns()}",
            name,
            description,
        )
        return Collection.from_row(row)

    async def collections(self) -> list[CollectionCounted]:
        rows = await self._pool.fetch(
            "SELECT c.id, c.name, c.description, count(n.id) AS notes FROM collections c "
            "LEFT JOIN notes n ON n.collection_id = c.id GROUP BY c.id ORDER BY c.name"
        )
        return [CollectionCounted.from_row(r) for r in rows]

    async def add_note(
        self,
        collection: str,
        title: str,
        body: str,
        tags: list[str],
        data: dict[str, JsonValue],
    ) -> NoteAdded:
        async with self._pool.acquire() as conn, conn.transaction():
            collection_id = await conn.fetchval(
                "INSERT INTO collections (name) VALUES ($1) ON CONFLICT (name) "
                "DO UPDATE SET name = EXCLUDED.name RETURNING id",
                collection,
            )
            row = await conn.fetchrow(
                "INSERT INTO notes (collection_id, title, body, tags, data) "
                "VALUES ($1, $2, $3, $4, $5::text::jsonb) RETURNING id, created_at",
                collection_id,
                title,
                body,
                tags,
                dumps(data),
            )
        return NoteAdded(collection, title, row["id"], row["created_at"])

    async def notes(
        self, collection: str | None, tag: str | None, query: str | None, limit: int
    ) -> list[Note]:
        rows = await self._pool.fetch(
            f"SELECT {Note.columns()} FROM {NOTES_OF} "
            "WHERE ($1::text IS NULL OR c.name = $1) "
            "AND ($2::text IS NULL OR $2 = ANY(n.tags)) "
            "AND ($3::text IS NULL OR n.title ILIKE $3 ESCAPE '\\' "
            "OR n.body ILIKE $3 ESCAPE '\\') ORDER BY n.created_at DESC LIMIT $4",
            collection,
            tag,
            None if query is None else like_contains(query),
            limit,
        )
        return [Note.from_row(r) for r in rows]

    async def delete_note(self, note_id: uuid.UUID) -> bool:
        status = await self._pool.execute("DELETE FROM notes WHERE id = $1", note_id)
        return affected(status) > 0
