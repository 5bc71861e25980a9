"""State tools through the in-memory MCP transport, with a fake store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError

from butlers.daemon.server import install_schema_lookup
from butlers.stores.state import StateValueError, check_key
from butlers.tools.state import register_state_tools


class MemoryStore:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    async def get(self, key: str) -> tuple[bool, Any]:
        return (key in self.data, self.data.get(key))

    async def set(self, key: str, value: Any) -> datetime:
        check_key(key)
        if isinstance(value, str) and "\x00" in value:
            raise StateValueError("JSONB rejects the NUL character")
        self.data[key] = value
        return datetime(2026, 1, 1, tzinfo=UTC)

    async def list(self, prefix: str | None = None) -> list[dict[str, Any]]:
        return [
            {"key": k, "value": v}
            for k, v in sorted(self.data.items())
            if k.startswith(prefix or "")
        ]

    async def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None


@pytest.fixture
async def client() -> Client:  # type: ignore[type-arg]
    mcp = FastMCP("t")
    register_state_tools(mcp, MemoryStore())  # type: ignore[arg-type]
    await install_schema_lookup(mcp)
    async with Client(mcp) as c:
        yield c


async def test_scalars_and_null_come_back_typed(client: Client) -> None:  # type: ignore[type-arg]
    for value in (42, 3.5, True, None, "s", [], {}):
        await client.call_tool("state_set", {"key": "k", "value": value})
        assert (await client.call_tool("state_get", {"key": "k"})).data == value


async def test_store_errors_become_tool_errors_naming_the_key(client: Client) -> None:  # type: ignore[type-arg]
    with pytest.raises(ToolError, match="state_set\\('k'\\): JSONB rejects"):
        await client.call_tool("state_set", {"key": "k", "value": "a\x00"})


async def test_empty_key_is_rejected_by_the_schema(client: Client) -> None:  # type: ignore[type-arg]
    with pytest.raises(ToolError):
        await client.call_tool("state_get", {"key": ""})


async def test_schema_lookup_answers_for_every_tool() -> None:
    mcp = FastMCP("t")
    register_state_tools(mcp, MemoryStore())  # type: ignore[arg-type]
    await install_schema_lookup(mcp)
    lookup = mcp._mcp_server.get_tool_input_schema
    assert lookup is not None
    assert lookup("state_set")["required"] == ["key", "value"]
    assert lookup("nope") is None
