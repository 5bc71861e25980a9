"""A butler's HTTP door: a bounded number of MCP sessions, each for a short while; one
write per answer; room for callers with a token however many strangers connect."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import uvicorn
from fastmcp import FastMCP

from butlers.auth.http import HostPolicy
from butlers.auth.tokens import TokenBook, digest, new_user_token
from butlers.daemon.http import build_http_app
from butlers.daemon.http_limits import SESSION_IDLE_TIMEOUT, HeaderTimeoutProtocol, admission_of
from butlers.daemon.serve import http_config
from butlers.db.embedded import free_port
from tests.support.raw_mcp import decode
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


FLOOD = 600  # sockets an attacker opens without a token and never finishes


async def _flood(port: int, count: int) -> list[asyncio.StreamWriter]:
    """`count` connections to `port` that present no token: half send nothing, half
    start a request's headers and never finish them."""

    async def one(index: int) -> asyncio.StreamWriter | None:
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return None
        if index % 2:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        return writer

    writers: list[asyncio.StreamWriter] = []
    for start in range(0, count, 100):
        batch = await asyncio.gather(*(one(i) for i in range(start, min(count, start + 100))))
        writers += [w for w in batch if w is not None]
    return writers


async def _call_echo(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    opened = await _post(
        client,
        url,
        {
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "caller", "version": "1"},
            },
        },
    )
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    await _post(client, url, {"method": "notifications/initialized"}, session)
    call = {"id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"x": 7}}}
    answer = await _post(client, url, call, session)
    assert answer.status_code == 200, (answer.status_code, answer.text)
    return decode(answer)


async def test_silent_sockets_without_a_token_do_not_starve_callers_with_one() -> None:
    """600 sockets that never send a token (nor finish their headers) leave room for
    a caller with a token: its `tools/call` is answered, on fresh connections too."""
    mcp = FastMCP("t")

    @mcp.tool
    def echo(x: int) -> int:
        return x

    app = build_http_app(
        mcp, "t", _ready, book=TokenBook(user_digests={digest(TOKEN): "user"}), hosts=HostPolicy()
    )
    port = free_port()
    server = uvicorn.Server(http_config(app, host="127.0.0.1", port=port))
    serving = asyncio.create_task(server.serve())
    writers: list[asyncio.StreamWriter] = []
    try:
        async with asyncio.timeout(60):
            while not server.started:
                assert not serving.done(), "the app did not start"
                await asyncio.sleep(0.01)
            writers = await _flood(port, FLOOD)
            assert len(writers) == FLOOD
            await asyncio.sleep(0.5)  # let the server accept every one of them
            url = f"http://127.0.0.1:{port}/mcp"
            for _ in range(3):  # a new connection each time: each must get in
                async with httpx.AsyncClient(timeout=10) as client:
                    answer = await _call_echo(client, url)
                assert answer["result"]["structuredContent"] == {"result": 7}, answer
            admission = admission_of(server.server_state)
            assert admission.pending <= admission.max_pending_per_peer
    finally:
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
        server.should_exit = True
        await serving
