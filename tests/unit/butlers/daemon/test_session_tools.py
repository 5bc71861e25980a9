"""A session's toolbox on the butler's own server (`daemon.calls.SessionToolServer`): the
server's middleware sees the session, results and errors reach the model as an MCP
client would show them."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext

from butlers.auth.access import access_meta
from butlers.auth.identity import session, user
from butlers.auth.middleware import AccessMiddleware, caller_identity, current_caller
from butlers.daemon.calls import SessionToolServer
from butlers.daemon.server import install_schema_lookup
from butlers.llm.toolbox import SESSION_META_KEY, session_toolboxes, speaking_as


class Seen(Middleware):
    """Records what the chain sees of each call: the caller and the request's `_meta`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        identity = caller_identity(context)
        label = identity.label if identity else "none"
        self.calls.append((context.message.name, label, context.message.meta))
        return await call_next(context)


@pytest.fixture
async def server() -> tuple[FastMCP, Seen]:
    mcp = FastMCP("health")
    access, seen = AccessMiddleware(), Seen()
    mcp.add_middleware(access)
    mcp.add_middleware(seen)

    @mcp.tool
    async def whoami() -> str:
        """Who called."""
        return current_caller().label

    @mcp.tool
    async def nothing() -> None:
        """Returns nothing."""

    @mcp.tool
    async def fails(why: str) -> str:
        """Always fails."""
        raise ToolError(f"failed: {why}")

    @mcp.tool(meta=access_meta(sessions=False))
    async def trigger(prompt: str) -> str:
        """Closed to sessions."""
        return prompt

    tools = await mcp.list_tools()
    access.install(tools)
    await install_schema_lookup(mcp, tools)  # the tool table, as a built butler has it
    return mcp, seen


async def test_the_server_sees_the_session_and_its_meta(server: tuple[FastMCP, Seen]) -> None:
    mcp, seen = server
    async with session_toolboxes(SessionToolServer(mcp), "health")("s-1") as toolbox:
        listed = sorted(t.name for t in await toolbox.list())
        answer = await toolbox.call("whoami", {})
    assert listed == ["fails", "nothing", "whoami"]  # `trigger` stays hidden
    assert answer == ("session:s-1", '"session:s-1"', False)
    assert seen.calls == [("whoami", "session:s-1", {SESSION_META_KEY: "s-1"})]


async def test_errors_and_empty_results_reach_the_model_as_a_client_shows_them(
    server: tuple[FastMCP, Seen],
) -> None:
    mcp, _ = server
    async with session_toolboxes(SessionToolServer(mcp), "health")("s-2") as toolbox:
        await toolbox.list()
        assert await toolbox.call("fails", {"why": "no"}) == ("failed: no", "failed: no", True)
        _, text, is_error = await toolbox.call("fails", {})
        assert is_error and "why" in text and "Missing required argument" in text
        assert await toolbox.call("nothing", {}) == (
            {"result": None},
            '{"result": null}',
            False,
        )
        hidden = await toolbox.call("trigger", {"prompt": "x"})
    assert hidden[2] is True and "not available in this session" in hidden[1]


async def test_a_call_the_access_rule_refuses_is_an_error_for_the_model(
    server: tuple[FastMCP, Seen],
) -> None:
    """Even a name the toolbox let through is checked by the server's rule."""
    mcp, seen = server
    tools = SessionToolServer(mcp)

    with speaking_as(session("s-3")):
        _, text, is_error = await tools.call_tool("trigger", {"prompt": "x"}, {})
        _, undeclared, refused = await tools.call_tool("nope", {}, {})
    assert is_error and "not available to an LLM session" in text
    assert refused and undeclared == "nope is not available to session:s-3"
    assert seen.calls == []  # refused before anything else ran
    with speaking_as(user()):
        unknown = await tools.call_tool("nope", {}, {})
    assert unknown == ("Unknown tool: 'nope'", "Unknown tool: 'nope'", True)
