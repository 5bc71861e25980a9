"""A butler's HTTP app keeps a bounded number of MCP sessions, each for a short while."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
from fastmcp import FastMCP

from butlers.auth.http import HostPolicy
from butlers.auth.tokens import TokenBook, digest, new_user_token
from butlers.daemon.http import build_http_app
from butlers.daemon.http_limits import SESSION_IDLE_TIMEOUT
from tests.support.serving import served_asgi

TOKEN = new_user_token()
PROTOCOL = "2025-06-18"  # the session-keeping protocol of MCP Inspector, Claude Code, ...


async def _ready() -> tuple[bool, dict[str, object]]:
    return True, {}


@contextlib.asynccontextmanager
async def _serving(idle_timeout: float) -> AsyncIterator[str]:
    app = build_http_app(
        FastMCP("t"),
        "t",
        _ready,
        book=TokenBook(user_digests={digest(TOKEN): "user"}),
        hosts=HostPolicy(),
        session_idle_timeout=idle_timeout,
    )
    async with served_asgi(app) as base:
        yield f"{base}/mcp"


async def _post(
    client: httpx.AsyncClient, url: str, message: dict[str, Any], session: str | None = None
) -> httpx.Response:
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {TOKEN}"}
    if session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": PROTOCOL}
    return await client.post(url, json={"jsonrpc": "2.0", **message}, headers=headers)


async def test_an_idle_mcp_session_is_forgotten() -> None:
    async with _serving(idle_timeout=1.0) as url, httpx.AsyncClient(timeout=10) as client:
        opened = await _post(
            client,
            url,
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "idle", "version": "1"},
                },
            },
        )
        session = opened.headers["mcp-session-id"]
        await _post(client, url, {"method": "notifications/initialized"}, session)
        assert (await _post(client, url, {"id": 2, "method": "ping"}, session)).status_code == 200
        # Any request resets the idle clock: only look after longer than the timeout.
        deadline = time.monotonic() + 15
        while True:
            await asyncio.sleep(2.0)
            status = (await _post(client, url, {"id": 3, "method": "ping"}, session)).status_code
            if status == 404:
                break
            assert time.monotonic() < deadline, "the idle session was kept"


def test_sessions_expire_after_minutes_not_half_an_hour() -> None:
    assert SESSION_IDLE_TIMEOUT <= 300
