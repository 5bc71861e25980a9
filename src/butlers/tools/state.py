"""Core tools `state_get`, `state_set`, `state_list`, `state_delete`."""

from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, JsonValue

from butlers.jsonutil import to_json
from butlers.stores.state import MAX_KEY_LENGTH, StateStore, StateValueError

Key = Annotated[str, Field(min_length=1, max_length=MAX_KEY_LENGTH, description="The state key.")]
CORE = {"module": "core"}


def register_state_tools(mcp: FastMCP, store: StateStore) -> None:
    @mcp.tool(meta=CORE, annotations={"readOnlyHint": True})
    async def state_get(key: Key) -> JsonValue:
        """Read a value from this butler's state store; null when the key is missing."""
        _found, value = await store.get(key)
        return value

    @mcp.tool(meta=CORE, annotations={"idempotentHint": True})
    async def state_set(
        key: Key,
        value: Annotated[JsonValue, Field(description="Any JSON value, null included.")],
    ) -> JsonValue:
        """Write a JSON value under a key, replacing any previous value (last writer wins)."""
        try:
            updated_at = await store.set(key, value)
        except StateValueError as exc:
            raise ToolError(f"state_set({key!r}): {exc}") from None
        return {"key": key, "updated_at": updated_at.isoformat()}

    @mcp.tool(meta=CORE, annotations={"readOnlyHint": True})
    async def state_list(
        prefix: Annotated[
            str | None,
            Field(description="Only keys starting with this text (matched literally)."),
        ] = None,
    ) -> JsonValue:
        """List entries `{key, value, created_at, updated_at}` ordered by key."""
        rows = await store.list(prefix)
        return to_json(rows)

    @mcp.tool(meta=CORE, annotations={"destructiveHint": True, "idempotentHint": True})
    async def state_delete(key: Key) -> JsonValue:
        """Delete a key. `deleted` says whether it existed."""
        return {"key": key, "deleted": await store.delete(key)}
