"""The `contacts` module's MCP-facing class: its config, tools and lifecycle."""

import uuid
from datetime import date, datetime
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.jsonutil import (
    MAX_FIELD_CHARS,
    MAX_NOTE_CHARS,
    AnyJson,
    JsonObject,
    Note,
    ShortText,
    to_json,
)
from butlers.modules.base import Module, ModuleContext, migration_chain, tool_meta
from butlers.modules.contacts.store import ContactStore
from butlers.stores.records import Record
from butlers.tooling import tool

NAME = "contacts"
Name = Annotated[str, Field(min_length=1, max_length=300)]


def _found(row: Record | None, contact_id: uuid.UUID) -> AnyJson:
    if row is None:
        raise ToolError(f"no contact {contact_id}; find one with contact_search")
    return to_json(row)


class ContactsModule(Module):
    name = NAME
    chain = migration_chain(NAME, __file__)
    dependencies = ("approvals",)

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store = ContactStore(ctx.pool)
        ctx.services.briefings[NAME] = store.briefing
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}

        async def contact_add(
            name: Name,
            email: ShortText | None = None,
            phone: ShortText | None = None,
            birthday: date | None = None,
            details: JsonObject | None = None,
        ) -> AnyJson:
            """Add a contact. Record only facts the user gave."""
            row = await store.add(name.strip(), email, phone, birthday, details or {})
            return to_json(row)

        tool(mcp, contact_add, meta=meta)
        tool(mcp, contact_add, name="contact_create", meta=meta)

        @tool(
            mcp,
            meta=tool_meta(NAME, "conditional", ("email", "phone")),
            annotations={"idempotentHint": True},
        )
        async def contact_update(
            contact_id: uuid.UUID,
            name: Name | None = None,
            email: ShortText | None = None,
            phone: ShortText | None = None,
            birthday: date | None = None,
            details: JsonObject | None = None,
        ) -> AnyJson:
            """Change the given fields of a contact; omitted fields stay as they are."""
            given = {
                "name": name,
                "email": email,
                "phone": phone,
                "birthday": birthday,
                "details": details,
            }
            changes = {key: value for key, value in given.items() if value is not None}
            if not changes:
                raise ToolError("nothing to update: pass at least one field")
            return _found(await store.update(contact_id, changes), contact_id)

        @tool(mcp, meta=meta, annotations=read)
        async def contact_search(
            query: Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS)],
            limit: Annotated[int, Field(ge=1, le=200)] = 20,
        ) -> AnyJson:
            """Contacts whose name, email or phone contains `query` (case-insensitive)."""
            return to_json(await store.search(query, limit))

        @tool(mcp, meta=meta, annotations=read)
        async def contact_get(contact_id: uuid.UUID) -> AnyJson:
            """One contact with its notes and interactions."""
            return _found(await store.get(contact_id), contact_id)

        @tool(mcp, meta=tool_meta(NAME, "always"), annotations={"destructiveHint": True})
        async def contact_delete(contact_id: uuid.UUID) -> AnyJson:
            """Delete a contact with its notes and interactions (needs approval)."""
            deleted = await store.delete(contact_id)
            if not deleted:
                raise ToolError(f"no contact {contact_id}")
            return {"contact_id": str(contact_id), "deleted": True}

        @tool(mcp, meta=meta)
        async def contact_note_add(
            contact_id: uuid.UUID,
            body: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS)],
        ) -> AnyJson:
            """Attach a note to a contact."""
            return _found(await store.add_note(contact_id, body), contact_id)

        @tool(mcp, meta=meta)
        async def interaction_log(
            contact_id: uuid.UUID,
            kind: Annotated[
                str,
                Field(
                    min_length=1,
                    max_length=MAX_FIELD_CHARS,
                    description="call, meeting, message, ...",
                ),
            ],
            summary: Note | None = None,
            occurred_at: datetime | None = None,
        ) -> AnyJson:
            """Record an interaction with a contact."""
            row = await store.log_interaction(contact_id, kind, summary, occurred_at)
            return _found(row, contact_id)
