"""Long-lived MCP clients under connection loss: a call that may have run is never
repeated unless it is idempotent; a call the server never saw is repeated."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import uvicorn
from fastmcp import FastMCP

from butlers.db.embedded import free_port
from butlers.mcp_clients import McpClient, OutcomeUnknown
from tests.support.proxy import DroppingProxy


class CountingServer:
    """An MCP server whose `work` tool counts its runs and takes a moment."""

    def __init__(self) -> None:
        self.runs = 0
        self.started = asyncio.Event()
        self.mcp = FastMCP("counter")

        @self.mcp.tool
        async def work() -> int:
            self.runs += 1
            self.started.set()
            await asyncio.sleep(0.3)
            return self.runs


@contextlib.asynccontextmanager
async def _serving(server: CountingServer, port: int | None = None) -> AsyncIterator[int]:
    """Serve `server` over streamable HTTP (a new app each time: a restarted process)."""
    port = port or free_port()
    config = uvicorn.Config(
        server.mcp.http_app(path="/mcp"), host="127.0.0.1", port=port, log_level="warning"
    )
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    while not uv.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        uv.should_exit = True
        await task


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[CountingServer, DroppingProxy, str]]:
    server = CountingServer()
    async with _serving(server) as port:
        proxy = DroppingProxy("127.0.0.1", port)
        url = f"http://127.0.0.1:{await proxy.start()}/mcp"
        try:
            yield server, proxy, url
        finally:
            await proxy.aclose()


async def _started(server: CountingServer) -> None:
    await asyncio.wait_for(server.started.wait(), 10)


async def test_a_call_dropped_after_it_was_sent_is_not_repeated(proxied) -> None:  # type: ignore[no-untyped-def]
    server, proxy, url = proxied
    clients = McpClient(timeout=10)
    try:
        await clients.list_tools(url)  # the session is open before the drop is armed
        proxy.drop_after(b'"work"', lambda: _started(server))
        with pytest.raises(OutcomeUnknown, match="not repeated, since it may have run"):
            await clients.call_tool(url, "work")
        assert proxy.dropped.is_set()
        await asyncio.sleep(0.5)  # a repeat, had there been one, would have run by now
        assert server.runs == 1
    finally:
        await clients.close()


async def test_an_idempotent_call_dropped_after_it_was_sent_is_repeated(proxied) -> None:  # type: ignore[no-untyped-def]
    server, proxy, url = proxied
    clients = McpClient(timeout=10)
    try:
        await clients.list_tools(url)  # the session is open before the drop is armed
        proxy.drop_after(b'"work"', lambda: _started(server))
        result = await clients.call_tool(url, "work", idempotent=True)
        assert proxy.dropped.is_set() and result.data == 2
    finally:
        await clients.close()


async def test_a_call_after_the_server_restarted_runs_once_there() -> None:
    server = CountingServer()
    clients = McpClient(timeout=10)
    try:
        async with _serving(server) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            assert (await clients.call_tool(url, "work")).data == 1
        restarted = CountingServer()  # a new process on the same port
        async with _serving(restarted, port):
            assert (await clients.call_tool(url, "work")).data == 1
        assert (server.runs, restarted.runs) == (1, 1)
    finally:
        await clients.close()
