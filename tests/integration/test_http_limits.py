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
from butlers.daemon.http_limits import SESSION_IDLE_TIMEOUT, HeaderTimeoutProtocol
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


class _Recorder:
    """A connection's transport that keeps what was written to it, write by write."""

    def __init__(self, transport: Any, writes: list[bytes]) -> None:
        self._transport = transport
        self.writes = writes

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


written: list[bytes] = []


class _RecordingProtocol(HeaderTimeoutProtocol):
    def connection_made(self, transport: Any) -> None:
        super().connection_made(_Recorder(transport, written))


async def test_a_response_head_goes_out_with_its_body_and_never_waits_for_one() -> None:
    """One write for the head and the body of an answer (not two segments); a head with
    no body yet (a HEAD request, an event stream) still goes out at once."""
    stream_go = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b'{"ok":true}'
        headers = [(b"content-type", b"application/json")]
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await stream_go.wait()
            await send({"type": "http.response.body", "body": body})
            return
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async with served_asgi(app, http=_RecordingProtocol) as base, asyncio.timeout(30):
        reader, writer = await asyncio.open_connection("127.0.0.1", int(base.rsplit(":", 1)[1]))
        written.clear()
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert await reader.readexactly(11) == b'{"ok":true}'
        assert written == [head + b'{"ok":true}']
        written.clear()
        writer.write(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        assert written == [head]
        written.clear()
        writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)  # no body yet
        assert b"transfer-encoding: chunked" in head
        assert written == [head]
        stream_go.set()
        assert await reader.readuntil(b"0\r\n\r\n") == b'b\r\n{"ok":true}\r\n0\r\n\r\n'
        writer.close()
