"""Building a butler's FastMCP server with its tools."""

from __future__ import annotations

from collections.abc import Sequence

from fastmcp import FastMCP
from fastmcp.tools import Tool

from butlers.daemon.runtime import ButlerRuntime
from butlers.stores.sessions import SessionStore
from butlers.stores.state import StateStore
from butlers.telemetry import ToolSpanMiddleware
from butlers.tools.sessions import register_session_tools
from butlers.tools.state import register_state_tools
from butlers.tools.status import register_status_tool


def build_server(runtime: ButlerRuntime) -> FastMCP:
    """A FastMCP server with the core tools of `runtime`'s butler."""
    mcp = FastMCP(name=runtime.name, instructions=runtime.resource.spec.instructions or None)
    register_status_tool(mcp, runtime)
    register_state_tools(mcp, StateStore(runtime.pool))
    register_session_tools(mcp, SessionStore(runtime.pool))
    return mcp


async def install_schema_lookup(mcp: FastMCP, tools: Sequence[Tool] | None = None) -> None:
    """Answer the transport's per-call input-schema question from a table.

    Without this, the streamable-HTTP transport validates `Mcp-Param-*` headers of
    every `tools/call` by running a full `tools/list` through the middleware chain
    (dereferencing every tool's schema): per-call work that grows with the number
    of registered tools. Call again whenever the set of tools changes.
    """
    listed = tools if tools is not None else await mcp.list_tools()
    schemas = {tool.name: tool.parameters for tool in listed}
    mcp._mcp_server.get_tool_input_schema = schemas.get


async def finalize_server(
    mcp: FastMCP, runtime: ButlerRuntime, *, secrets: tuple[str, ...] = ()
) -> None:
    """Once every tool is registered: the input-schema table and the tool spans."""
    tools = await mcp.list_tools()
    modules = {t.name: str((t.meta or {}).get("module", "core")) for t in tools}
    sensitive: dict[str, set[str]] = {
        t.name: set((t.meta or {}).get("sensitive_args", ())) for t in tools
    }
    for rule in runtime.resource.spec.approvals.rules:
        sensitive.setdefault(rule.tool, set()).update(rule.sensitive_args)
    mcp.add_middleware(
        ToolSpanMiddleware(
            runtime.name,
            modules.get,
            lambda name: sensitive.get(name, ()),
            lambda: secrets,
        )
    )
    await install_schema_lookup(mcp, tools)
