"""The `general` module's MCP-facing class: its config, tools and lifecycle."""

import uuid
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

from butlers.jsonutil import AnyJson, JsonObject, LongText, Note, ShortText, to_json
from butlers.modules.base import Module, ModuleContext, migration_chain, tool_meta
from butlers.modules.general.store import GeneralStore
from butlers.tooling import tool

NAME = "general"
CollectionName = Annotated[str, Field(min_length=1, max_length=200)]


class GeneralModule(Module):
    name = NAME
    chain = migration_chain(NAME, __file__)

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store = GeneralStore(ctx.pool)
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}

        @tool(mcp, meta=meta, annotations={"idempotentHint": True})
        async def collection_create(
            name: CollectionName, description: Note | None = None
        ) -> AnyJson:
            """Create a collection (a list, a notebook); returns the existing one if present."""
            return to_json(await store.create_collection(name, description))

        @tool(mcp, meta=meta, annotations=read)
        async def collection_list() -> AnyJson:
            """Collections with their number of notes."""
            return to_json(await store.collections())

        @tool(mcp, meta=meta)
        async def note_add(
            title: Annotated[str, Field(min_length=1, max_length=500)],
            body: LongText = "",
            collection: CollectionName = "inbox",
            tags: Annotated[list[ShortText] | None, Field(max_length=100)] = None,
            data: JsonObject | None = None,
        ) -> AnyJson:
            """File a note in a collection (created on first use)."""
            return to_json(await store.add_note(collection, title, body, tags or [], data or {}))

        @tool(mcp, meta=meta, annotations=read)
        async def note_list(
            collection: ShortText | None = None,
            tag: ShortText | None = None,
            query: ShortText | None = None,
            limit: Annotated[int, Field(ge=1, le=500)] = 50,
        ) -> AnyJson:
            """Notes, newest first, filtered by collection, tag or text in title/body."""
            return to_json(await store.notes(collection, tag, query, limit))

        @tool(mcp, meta=meta, annotations={"destructiveHint": True})
        async def note_delete(note_id: uuid.UUID) -> AnyJson:
            """Delete one note."""
            return {"note_id": str(note_id), "deleted": await store.delete_note(note_id)}
