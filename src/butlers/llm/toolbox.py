"""A session's view of its own butler: that butler's tools, as the butler's access rule
shows them to a session.

The toolbox runs on the butler's own server in this process, through `ToolServer`
(the daemon's `calls.SessionToolServer`: the server's `tools/list` and its whole
`tools/call` middleware chain, run directly, with no MCP client or transport in
between). Every list and call runs with the session's identity in `current_identity`,
so the server lists and runs only what a session may call (`auth.access`), the same
rule the claude-code adapter's HTTP connection meets with its session token; the
argument guard, the approval gate and the tool span see that identity too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol

from butlers.auth.identity import Identity, current_identity, session
from butlers.llm.types import ToolSpec

SESSION_META_KEY = "butlers/session_id"  # the session a call belongs to (audit only)

ToolOutcome = tuple[Any, str, bool]
"""(result value, result text for the model, is_error), as `loop.Toolbox.call` returns."""


class ToolServer(Protocol):
    """The butler's own server as a session's toolbox reaches it. Both methods act for
    the caller in `current_identity`."""

    async def list_tools(self) -> list[ToolSpec]:
        """The tools that caller may see (the access rule's listing)."""
        ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> ToolOutcome:
        """Run `name` through the server's middleware chain; `meta` is the request's
        `_meta`. A refused, failed or unknown call is an outcome with is_error set,
        its text what an MCP client would show; only a failure outside the tool raises."""
        ...


@contextmanager
def speaking_as(identity: Identity) -> Iterator[None]:
    """Calls made from this block act for `identity` (`current_identity`)."""
    token = current_identity.set(identity)
    try:
        yield
    finally:
        current_identity.reset(token)


class SessionToolbox:
    """One session's tools: what its identity may see, and nothing it was not shown."""

    def __init__(self, server: ToolServer, butler: str, identity: Identity) -> None:
        self._server = server
        self._butler = butler
        self._identity = identity
        self._meta = {SESSION_META_KEY: identity.name}
        self._allowed: set[str] = set()

    async def list(self) -> list[ToolSpec]:
        if not self._identity.tools:
            return []
        with speaking_as(self._identity):
            specs = await self._server.list_tools()
        self._allowed = {t.name for t in specs}
        return specs

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        if name not in self._allowed:
            text = (
                f"tool {name!r} is not available in this session: only butler "
                f"{self._butler!r}'s own tools that a session may use can be called"
            )
            return text, text, True
        with speaking_as(self._identity):
            return await self._server.call_tool(name, arguments, dict(self._meta))


class NoTools:
    """The toolbox of a session that may call nothing (the classifier's)."""

    async def list(self) -> list[ToolSpec]:
        return []

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        text = f"this session has no tools (asked for {name!r})"
        return text, text, True


def session_toolboxes(server: ToolServer, butler: str) -> Callable[..., Any]:
    """A factory of toolboxes over the butler's own server: `open_toolbox(session_id,
    *, tools=True)` is an async context manager yielding the session's toolbox."""

    @asynccontextmanager
    async def open_toolbox(session_id: str, *, tools: bool = True) -> AsyncIterator[Any]:
        if not tools:
            yield NoTools()
            return
        yield SessionToolbox(server, butler, session(session_id))

    return open_toolbox
