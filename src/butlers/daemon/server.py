"""Building a butler's FastMCP server with its tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from fastmcp import FastMCP
from fastmcp.tools import Tool
from mcp.server.request_state import InvalidRequestState, RequestStateSecurity

from butlers.core.context import ButlerContext
from butlers.core.services import SessionServices
from butlers.daemon.calls import caller_of
from butlers.daemon.guard import ArgumentGuard
from butlers.redaction import Redactor
from butlers.stores.sessions import SessionStore
from butlers.stores.state import StateStore
from butlers.telemetry import ToolSpanMiddleware
from butlers.tools.schedules import register_schedule_tools
from butlers.tools.secrets import register_secret_tools
from butlers.tools.sessions import register_session_tools
from butlers.tools.spawn import RouteRefusal, register_spawn_tools
from butlers.tools.state import register_state_tools
from butlers.tools.status import register_status_tool


class NoRequestState:
    """The `requestState` codec of a butler, which never asks for input mid-call.

    A tool, prompt or resource that answers `input_required` (MCP 2026-07-28: elicitation
    or sampling across rounds) gets its `requestState` sealed by the SDK's codec; no
    butler tool does (none takes a FastMCP `Context`), so a butler mints no state, and
    state a client echoes was not minted here: refused, as the SDK's default codec (a
    per-process AES-GCM key) would refuse it, with the same "Invalid or expired
    requestState". That default derives its key at start-up, which loads and
    initialises the OpenSSL inside `cryptography` (~1.4 MB of every butler process).
    Sealing raises, so a tool that did ask for input fails instead of minting state.
    """

    def seal(self, payload: bytes) -> str:
        raise RuntimeError("a butler mints no requestState (its tools never ask for input)")

    def unseal(self, token: str) -> bytes:
        raise InvalidRequestState("not minted by this butler (a butler mints none)")


def build_server(butler: ButlerContext) -> FastMCP:
    """A FastMCP server with the core tools of `butler`'s butler."""
    mcp = FastMCP(
        name=butler.name,
        instructions=butler.resource.spec.instructions or None,
        request_state_security=RequestStateSecurity(codec=NoRequestState(), audience=butler.name),
    )
    # First middleware, so outermost: a refused call reaches nothing else; then the
    # argument guard (NUL, NaN, oversized integers) before any module gate sees them.
    mcp.add_middleware(butler.access)
    mcp.add_middleware(ArgumentGuard())
    register_status_tool(mcp, butler)
    register_state_tools(mcp, StateStore(butler.pool))
    register_session_tools(mcp, SessionStore(butler.pool))
    if butler.secrets is not None:
        register_secret_tools(mcp, butler.secrets)
    return mcp


def register_session_service_tools(
    mcp: FastMCP, services: SessionServices, route_refusal: RouteRefusal
) -> None:
    """`trigger`, `tick` and the schedule tools, over the butler's spawner and scheduler."""
    register_spawn_tools(mcp, services.spawner, services.scheduler, route_refusal)
    register_schedule_tools(mcp, services.scheduler.store, services.jobs)


async def install_schema_lookup(mcp: FastMCP, tools: Sequence[Tool] | None = None) -> None:
    """Answer the transport's per-call input-schema question from a table, and give the
    direct `tools/call` path (`calls.ToolCaller`) its table of tools.

    Without this, the streamable-HTTP transport validates `Mcp-Param-*` headers of
    every `tools/call` by running a full `tools/list` through the middleware chain
    (dereferencing every tool's schema): per-call work that grows with the number
    of registered tools. Call again whenever the set of tools changes.
    """
    listed = tools if tools is not None else await mcp.list_tools()
    schemas = {tool.name: tool.parameters for tool in listed}
    mcp._mcp_server.get_tool_input_schema = schemas.get
    caller_of(mcp).install(listed)


async def finalize_server(
    mcp: FastMCP,
    butler: ButlerContext,
    redactor: Redactor,
    *,
    session_hidden: tuple[str, ...] = (),
) -> Callable[[], Awaitable[None]]:
    """Once every tool is registered: the access table, the input-schema table, the tools'
    declared sensitive arguments given to the redaction policy, and the tool spans.
    Returns the refresh to await whenever the set of tools changes (a module switched)."""
    owners: dict[str, str] = {}

    async def refresh() -> None:
        tools = await mcp.list_tools()
        butler.access.install(tools, session_hidden)
        owners.clear()
        owners.update({t.name: str((t.meta or {}).get("module", "core")) for t in tools})
        sensitive: dict[str, set[str]] = {
            t.name: set((t.meta or {}).get("sensitive_args", ())) for t in tools
        }
        for rule in butler.resource.spec.approvals.rules:
            sensitive.setdefault(rule.tool, set()).update(rule.sensitive_args)
        redactor.declare_sensitive_args(sensitive)
        await install_schema_lookup(mcp, tools)

    # Outermost, so a call the approval gate holds, denies or lets expire has its span
    # (and log line) too, covering the wait.
    mcp.middleware.insert(0, ToolSpanMiddleware(butler.name, owners.get, redactor))
    await refresh()
    return refresh
