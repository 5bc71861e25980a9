"""A session's view of its own butler over MCP: only that butler's tools, minus the
ones a session must not call (those that start sessions themselves)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any

from fastmcp import Client

from butlers.llm.types import ToolSpec

# Tool calls are bounded by the session's own timeout (the spawner's); this is only a
# backstop that must outlast any approval wait a gated tool may hold the call for.
CALL_TIMEOUT = 24 * 3600.0
SESSION_META_KEY = "butlers/session_id"  # tells tools (e.g. the approval gate) whose call it is


class McpToolbox:
    def __init__(
        self,
        client: Client[Any],
        butler: str,
        hidden: Collection[str],
        session_id: str | None = None,
    ) -> None:
        self._client = client
        self._meta = {SESSION_META_KEY: session_id} if session_id else None
        self._butler = butler
        self._hidden = frozenset(hidden)
        self._allowed: set[str] = set()

    async def list(self) -> list[ToolSpec]:
        tools = await self._client.list_tools()
        specs = [
            ToolSpec(t.name, t.description or "", dict(t.input_schema or {}))
            for t in tools
            if t.name not in self._hidden
        ]
        self._allowed = {t.name for t in specs}
        return specs

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str, bool]:
        if name not in self._allowed:
            text = (
                f"tool {name!r} is not available in this session: only butler "
                f"{self._butler!r}'s own tools can be called"
            )
            return text, text, True
        result = await self._client.call_tool(
            name, arguments, raise_on_error=False, timeout=CALL_TIMEOUT, meta=self._meta
        )
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            return text, text, True
        if result.structured_content is not None:
            value = result.data if result.data is not None else result.structured_content
            try:
                return value, json.dumps(value, ensure_ascii=False, default=str), False
            except (TypeError, ValueError):
                return text, text, False
        return text, text, False


def in_memory_toolbox(server: Any, butler: str, hidden: Collection[str]) -> Callable[[], Any]:
    """A factory of toolboxes over an in-memory client of the butler's own FastMCP server."""

    @asynccontextmanager
    async def open_toolbox(session_id: str | None = None) -> AsyncIterator[McpToolbox]:
        async with Client(server, timeout=CALL_TIMEOUT) as client:
            yield McpToolbox(client, butler, hidden, session_id)

    return open_toolbox
