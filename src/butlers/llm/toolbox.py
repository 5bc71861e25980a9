"""A session's view of its own butler over MCP: that butler's tools, as the butler's
access rule shows them to a session.

The toolbox is an in-memory client of the butler's own server whose requests carry
the session's identity (`current_identity`, which the in-memory transport hands to
the server with each request): the server lists and runs only what a session may
call (`auth.access`), the same rule the claude-code adapter's HTTP connection meets
with its session token.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any

from fastmcp import Client

from butlers.auth.identity import Identity, current_identity, session
from butlers.llm.types import ToolSpec

# Tool calls are bounded by the session's own timeout (the spawner's); this is only a
# backstop that must outlast any approval wait a gated tool may hold the call for.
CALL_TIMEOUT = 24 * 3600.0
SESSION_META_KEY = "butlers/session_id"  # the session a call belongs to (audit only)


@contextmanager
def speaking_as(identity: Identity) -> Iterator[None]:
    """Requests sent from this block carry `identity` to the in-memory server."""
    token = current_identity.set(identity)
    try:
        yield
    finally:
        current_identity.reset(token)


class McpToolbox:
    def __init__(self, client: Client[Any], butler: str, identity: Identity) -> None:
        self._client = client
        self._butler = butler
        self._identity = identity
        self._meta = {SESSION_META_KEY: identity.name}
        self._allowed: set[str] = set()

    async def list(self) -> list[ToolSpec]:
        if not self._identity.tools:
            return []
        with speaking_as(self._identity):
            tools = await self._client.list_tools()
        specs = [ToolSpec(t.name, t.description or "", dict(t.input_schema or {})) for t in tools]
        self._allowed = {t.name for t in specs}
        return specs

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str, bool]:
        if name not in self._allowed:
            text = (
                f"tool {name!r} is not available in this session: only butler "
                f"{self._butler!r}'s own tools that a session may use can be called"
            )
            return text, text, True
        with speaking_as(self._identity):
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


class NoTools:
    """The toolbox of a session that may call nothing (the classifier's)."""

    async def list(self) -> list[ToolSpec]:
        return []

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str, bool]:
        text = f"this session has no tools (asked for {name!r})"
        return text, text, True


def in_memory_toolbox(server: Any, butler: str) -> Callable[..., Any]:
    """A factory of toolboxes over an in-memory client of the butler's own FastMCP server."""

    @asynccontextmanager
    async def open_toolbox(session_id: str, *, tools: bool = True) -> AsyncIterator[Any]:
        if not tools:
            yield NoTools()
            return
        identity = session(session_id)
        async with AsyncExitStack() as stack:
            with speaking_as(identity):
                client = await stack.enter_async_context(Client(server, timeout=CALL_TIMEOUT))
            yield McpToolbox(client, butler, identity)

    return open_toolbox
