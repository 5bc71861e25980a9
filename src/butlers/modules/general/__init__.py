"""`general`: named collections of notes for anything no specialist owns."""

import uuid
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

from butlers.db.pool import dumps
from butlers.db.sql import like_contains
from butlers.jsonutil import AnyJson, JsonObject, LongText, Note, ShortText, to_json
from butlers.modules.base import Module, ModuleContext, migration_chain, tool_meta
from butlers.tooling import tool

NAME = "general"
CollectionName = Annotated[str, Field(min_length=1, max_length=200)]
NOTE = "n.id, c.name AS collection, n.title, n.body, n.data, n.tags, n.created_at"


class GeneralModule(Module):
    name = NAME
    chain = migration_chain(NAME, __file__)

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        pool = ctx.pool
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}

        @tool(mcp, meta=meta, annotations={"idempotentHint": True})
        async def collection_create(
            name: CollectionName, description: Note | None = None
        ) -> AnyJson:
            """Create a collection (a list, a notebook); returns the existing one if present."""
            row = await pool.fetchrow(
                "INSERT INTO collections (name, description) VALUES ($1, $2) "
                "ON CONFLICT (name) DO UPDATE SET description = "
                "COALESCE(EXCLUDED.description, collections.description) "
                "RETURNING id, name, description, created_at",
                name,
                description,
            )
            return to_json(dict(row))

        @tool(mcp, meta=meta, annotations=read)
        async def collection_list() -> AnyJson:
            """Collections with their number of notes."""
            rows = await pool.fetch(
                "SELECT c.id, c.name, c.description, count(n.id) AS notes FROM collections c "
                "LEFT JOIN notes n ON n.collection_id = c.id GROUP BY c.id ORDER BY c.name"
            )
            return to_json([dict(r) for r in rows])

        @tool(mcp, meta=meta)
        async def note_add(
            title: Annotated[str, Field(min_length=1, max_length=500)],
            body: LongText = "",
            collection: CollectionName = "inbox",
            tags: Annotated[list[ShortText] | None, Field(max_length=100)] = None,
            data: JsonObject | None = None,
        ) -> AnyJson:
            """File a note in a collection (created on first use)."""
            async with pool.acquire() as conn, conn.transaction():
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
                    tags or [],
                    dumps(data or {}),
                )
            return to_json({"collection": collection, "title": title, **dict(row)})

        @tool(mcp, meta=meta, annotations=read)
        async def note_list(
            collection: ShortText | None = None,
            tag: ShortText | None = None,
            query: ShortText | None = None,
            limit: Annotated[int, Field(ge=1, le=500)] = 50,
        ) -> AnyJson:
            """Notes, newest first, filtered by collection, tag or text in title/body."""
            rows = await pool.fetch(
                f"SELECT {NOTE} FROM notes n JOIN collections c ON c.id = n.collection_id "
                "WHERE ($1::text IS NULL OR c.name = $1) "
                "AND ($2::text IS NULL OR $2 = ANY(n.tags)) "
                "AND ($3::text IS NULL OR n.title ILIKE $3 ESCAPE '\\' "
                "OR n.body ILIKE $3 ESCAPE '\\') ORDER BY n.created_at DESC LIMIT $4",
                collection,
                tag,
                None if query is None else like_contains(query),
                limit,
            )
            return to_json([dict(r) for r in rows])

        @tool(mcp, meta=meta, annotations={"destructiveHint": True})
        async def note_delete(note_id: uuid.UUID) -> AnyJson:
            """Delete one note."""
            status = await pool.execute("DELETE FROM notes WHERE id = $1", note_id)
            return {"note_id": str(note_id), "deleted": status != "DELETE 0"}
