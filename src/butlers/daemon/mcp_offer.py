"""The tool offer (`llm.offer`) for sessions whose runtime lists the butler's tools over
MCP: the claude-code runtime's `claude -p`, connected with the session's token.

An HTTP adapter's session gets its offer from the agent loop. A claude-code session
reads `tools/list` itself, so the butler applies the same tiers there: such a session
lists the offered tools and `load_tools`, whose argument names the tools on request
(an enum) and whose description says what each does; a call loads them for that
session and tells its client `notifications/tools/list_changed` (on the call's own
stream), so the client lists again and sees them. A call naming a tool on request
runs loaded or not, as in the loop: the access rule decides what a session may call,
this only decides what it is shown. Everyone else (the owner, other butlers, the
loop's in-process sessions) lists no `load_tools`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from mcp import types as mcp_types

from butlers.auth.identity import Identity
from butlers.auth.middleware import caller_identity, current_caller
from butlers.llm.offer import LOAD_TOOLS, is_on_request, loader_spec
from butlers.tooling import tool

LOADER = "mcp_loader"  # meta key of the butler's own `load_tools` tool
TRACKED_SESSIONS = 1024  # sessions whose offer is remembered (the oldest forgotten)


def _over_http(ctx: Any) -> bool:
    request_context = ctx.request_context if ctx is not None else None
    request = getattr(request_context, "request", None) if request_context else None
    return request is not None and hasattr(request, "scope")


def _lists_over_mcp(identity: Identity | None, ctx: Any) -> bool:
    """A session holding tools, asking over HTTP (its runtime is an MCP client)."""
    return (
        identity is not None and identity.kind == "session" and identity.tools and _over_http(ctx)
    )


class McpToolOffer(Middleware):
    """Shows MCP-listing sessions their offer; remembers what each loaded."""

    def __init__(self, module_tiers: Mapping[str, str]) -> None:
        self._tiers = dict(module_tiers)
        self._loaded: OrderedDict[str, set[str]] = OrderedDict()
        self._waiting: OrderedDict[str, list[str]] = OrderedDict()

    def _remember(self, table: OrderedDict[str, Any], session_id: str, value: Any) -> None:
        table[session_id] = value
        table.move_to_end(session_id)
        while len(table) > TRACKED_SESSIONS:
            table.popitem(last=False)

    async def on_list_tools(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        tools = await call_next(context)
        identity = caller_identity(context)
        if not _lists_over_mcp(identity, context.fastmcp_context):
            if identity is not None and identity.kind == "local":
                return tools  # the butler's own tables (access, schemas) hold every tool
            return [t for t in tools if not (t.meta or {}).get(LOADER)]
        assert identity is not None
        loaded = self._loaded.get(identity.name, set())
        own = [t for t in tools if not (t.meta or {}).get(LOADER)]
        loaders = [t for t in tools if (t.meta or {}).get(LOADER)]
        if len(loaders) != 1 or any(t.name == LOAD_TOOLS for t in own):
            return own  # no loader, or a butler tool of that name: every tool is shown
        waiting = [
            t for t in own if is_on_request(t.meta or {}, self._tiers) and t.name not in loaded
        ]
        self._remember(self._waiting, identity.name, [t.name for t in waiting])
        if not waiting:
            return own
        spec = loader_spec([t.name for t in waiting])
        shown = loaders[0].model_copy(
            update={"description": spec.description, "parameters": spec.input_schema}
        )
        names = {t.name for t in waiting}
        return [t for t in own if t.name not in names] + [shown]

    def load(self, session_id: str, names: list[str]) -> dict[str, list[str]]:
        """Load `names` for the session; a name it was not shown waiting is an error
        naming the ones it may load."""
        loaded = self._loaded.get(session_id, set())
        waiting = sorted(n for n in self._waiting.get(session_id, []) if n not in loaded)
        unknown = [n for n in names if n not in waiting and n not in loaded]
        if not names or unknown:
            raise ToolError(
                f"no tool to load named {unknown}; these can be: {waiting}"
                if unknown
                else f"{LOAD_TOOLS} needs names: a list of tool names, from {waiting}"
            )
        added = [n for n in dict.fromkeys(names) if n not in loaded]
        self._remember(self._loaded, session_id, loaded | set(added))
        return {"loaded": added, "already_offered": [n for n in names if n not in added]}


def register_load_tool(mcp: FastMCP, offer: McpToolOffer) -> None:
    @tool(mcp, name=LOAD_TOOLS, meta={"module": "core", LOADER: True})
    async def load_tools(names: list[str], ctx: Context) -> dict[str, list[str]]:
        """Load more of this butler's tools by name (sessions that list tools over MCP)."""
        identity = current_caller()
        if not _lists_over_mcp(identity, ctx):
            raise ToolError(f"{LOAD_TOOLS} is for sessions that list this butler's tools over MCP")
        value = offer.load(identity.name, names)
        if value["loaded"]:
            await ctx.send_notification(mcp_types.ToolListChangedNotification())
        return value
