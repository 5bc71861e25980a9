"""The FastMCP middleware that applies `access.refusal` to every tool call and listing.

It is the outermost middleware of every butler, so a refused call creates nothing
(no approval row, no span of a tool that ran). The same rule covers HTTP callers
(identity from the bearer token, see `auth.http`) and in-process ones (identity from
`current_identity`, set by the session toolbox and the direct `tools/call` path).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools import Tool

from butlers.auth.access import SESSIONS, may_list, refusal, session_may_call
from butlers.auth.identity import Identity, current_identity

log = logging.getLogger(__name__)
SCOPE_KEY = "butlers.identity"  # where the ASGI gate puts the caller's identity


def caller_identity(context: MiddlewareContext[Any]) -> Identity | None:
    """The identity behind the message being handled; None for an HTTP request that
    carries none (never let through)."""
    return _identity_of(context.fastmcp_context)


def current_caller() -> Identity:
    """Inside a tool: who called it (the access middleware already let it through)."""
    from fastmcp.server.dependencies import get_context

    try:
        ctx = get_context()
    except RuntimeError:
        return current_identity.get()
    identity = _identity_of(ctx)
    if identity is None:
        raise ToolError("this request carries no identity; send a bearer token")
    return identity


def _identity_of(ctx: Any) -> Identity | None:
    request_context = ctx.request_context if ctx is not None else None
    request = getattr(request_context, "request", None) if request_context else None
    if request is not None and hasattr(request, "scope"):
        identity = request.scope.get(SCOPE_KEY)
        return identity if isinstance(identity, Identity) else None
    return current_identity.get()


class AccessMiddleware(Middleware):
    """Refuses calls the caller may not make and hides tools it could never call."""

    def __init__(self) -> None:
        self._meta: dict[str, Mapping[str, Any]] = {}

    def install(self, tools: Sequence[Tool], session_hidden: Collection[str] = ()) -> None:
        """Read every tool's declaration; `session_hidden` adds tools closed to sessions
        by their module (`Module.session_hidden_tools`). Call again when tools change."""
        table: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            meta = dict(tool.meta or {})
            if tool.name in session_hidden:
                meta[SESSIONS] = False
            table[tool.name] = meta
        self._meta = table

    def session_tools(self) -> set[str]:
        """Tools an LLM session may call (what a session's `tools/list` shows)."""
        return {name for name, meta in self._meta.items() if session_may_call(meta)}

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = context.message.name
        identity = caller_identity(context)
        if identity is None:
            raise ToolError("this request carries no identity; send a bearer token")
        meta = self._meta.get(name)
        if meta is None and identity.kind not in ("user", "local"):
            # Not (yet) in the table: nobody but the owner may call what is undeclared.
            reason: str | None = f"{name} is not available to {identity.label}"
        else:
            reason = refusal(identity, name, meta or {}, context.message.arguments or {})
        if reason is not None:
            log.warning("refused %s to %s: %s", name, identity.label, reason)
            raise ToolError(reason)
        return await call_next(context)

    async def on_list_tools(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        tools = await call_next(context)
        identity = caller_identity(context)
        if identity is None:
            return []
        if identity.kind in ("user", "local"):
            return tools
        return [
            tool
            for tool in tools
            if tool.name in self._meta and may_list(identity, self._meta[tool.name])
        ]
