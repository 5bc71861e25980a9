"""Core tools `state_get`, `state_set`, `state_list`, `state_delete`."""

from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.jsonutil import AnyJson, to_json
from butlers.llm.offer import OFFER, ON_REQUEST
from butlers.paging import PAGE_BYTES, Cursor, CursorError, decode_cursor, encode_cursor
from butlers.stores.state import MAX_KEY_LENGTH, StateStore, StateValueError
from butlers.tooling import tool

Key = Annotated[str, Field(min_length=1, max_length=MAX_KEY_LENGTH, description="The state key.")]
# Every butler has a state store: its sessions load these tools when they need them.
CORE = {"module": "core", OFFER: ON_REQUEST}
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
            int | None,
            Field(
                ge=1,
                le=MAX_STATE_PAGE,
                description="Page through the entries: at most this many per page (1-1000).",
            ),
        ] = None,
    ) -> AnyJson:
        """List entries ordered by key: an array of `{key, value, updated_at}`, at most
        1000 entries and about 1 MiB of values (past that, an error says so: narrow the
        prefix or page). Paging, opt-in: with `limit` (or `cursor`) the answer is one
        page `{items: [{key, value, created_at, updated_at}], next_cursor}`; pass
        `next_cursor` back as `cursor` for the next page (null: no more)."""
        if cursor is None and limit is None:
            entries, more = await store.list(prefix, limit=MAX_STATE_PAGE, budget=PAGE_BYTES)
            if more:
                raise ToolError(
                    f"state_list: more entries match than one answer holds (at most "
                    f"{MAX_STATE_PAGE} entries and about {PAGE_BYTES // (1024 * 1024)} MiB of "
                    "values); list a narrower prefix, or page: pass limit (1-1000) for "
                    "{items, next_cursor} and pass next_cursor back as cursor"
                )
            return [
                {"key": e.key, "value": e.value, "updated_at": e.updated_at.isoformat()}
                for e in entries
            ]
        try:
            after = decode_cursor(cursor, 1)[0] if cursor else None
        except CursorError as exc:
            raise ToolError(f"state_list: {exc}") from None
        if after is not None and not isinstance(after, str):
            raise ToolError("state_list: cursor is not a next_cursor this list returned")
        page = limit or DEFAULT_STATE_PAGE
        entries, more = await store.list(prefix, after=after, limit=page, budget=PAGE_BYTES)
        next_cursor = encode_cursor([entries[-1].key]) if more and entries else None
        return {"items": to_json(entries), "next_cursor": next_cursor}

    @tool(mcp, meta=CORE, annotations={"destructiveHint": True, "idempotentHint": True})
    async def state_delete(key: Key) -> AnyJson:
        """Delete a key. `deleted` says whether it existed."""
        return {"key": key, "deleted": await store.delete(key)}
