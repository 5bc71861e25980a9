"""Core tools `state_get`, `state_set`, `state_list`, `state_delete`."""

from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.jsonutil import AnyJson, to_json
from butlers.paging import PAGE_BYTES, Cursor, CursorError, decode_cursor, encode_cursor
from butlers.stores.state import MAX_KEY_LENGTH, StateStore, StateValueError
from butlers.tooling import tool

Key = Annotated[str, Field(min_length=1, max_length=MAX_KEY_LENGTH, description="The state key.")]
CORE = {"module": "core"}
DEFAULT_STATE_PAGE = 100
MAX_STATE_PAGE = 1000


def register_state_tools(mcp: FastMCP, store: StateStore) -> None:
    @tool(mcp, meta=CORE, annotations={"readOnlyHint": True})
    async def state_get(key: Key) -> AnyJson:
        """Read a value from this butler's state store; null when the key is missing."""
        _found, value = await store.get(key)
        return value

    @tool(mcp, meta=CORE, annotations={"idempotentHint": True})
    async def state_set(
        key: Key,
        value: Annotated[AnyJson, Field(description="Any JSON value, null included.")],
    ) -> AnyJson:
        """Write a JSON value under a key, replacing any previous value (last writer wins)."""
        try:
            updated_at = await store.set(key, value)
        except StateValueError as exc:
            raise ToolError(f"state_set({key!r}): {exc}") from None
        return {"key": key, "updated_at": updated_at.isoformat()}

    @tool(mcp, meta=CORE, annotations={"readOnlyHint": True})
    async def state_list(
        prefix: Annotated[
            str | None,
            Field(
                max_length=MAX_KEY_LENGTH,
                description="Only keys starting with this text (matched literally).",
            ),
        ] = None,
        cursor: Cursor = None,
        limit: Annotated[
            int, Field(ge=1, le=MAX_STATE_PAGE, description="Entries per page (at most 1000).")
        ] = DEFAULT_STATE_PAGE,
    ) -> AnyJson:
        """List entries `{key, value, created_at, updated_at}` ordered by key, a page at a
        time: `{items, next_cursor}`; pass `next_cursor` back for the next page (null: no
        more). A page holds at most `limit` entries and about 1 MiB of values."""
        try:
            after = decode_cursor(cursor, 1)[0] if cursor else None
        except CursorError as exc:
            raise ToolError(f"state_list: {exc}") from None
        if after is not None and not isinstance(after, str):
            raise ToolError("state_list: cursor is not a next_cursor this list returned")
        entries, more = await store.list(prefix, after=after, limit=limit, budget=PAGE_BYTES)
        next_cursor = encode_cursor([entries[-1].key]) if more and entries else None
        return {"items": to_json(entries), "next_cursor": next_cursor}

    @tool(mcp, meta=CORE, annotations={"destructiveHint": True, "idempotentHint": True})
    async def state_delete(key: Key) -> AnyJson:
        """Delete a key. `deleted` says whether it existed."""
        return {"key": key, "deleted": await store.delete(key)}
