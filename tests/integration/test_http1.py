"""The keep-alive HTTP/1.1 pool under the MCP client, against a real socket server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from butlers.http1 import Http1Pool, HttpFailure
from butlers.mcp_clients import EndpointUnavailable, McpClient


class Server:
    """Answers each request on a connection; `chunked` answers in chunks; counts
    connections; `close_after` closes each connection after that many answers."""

    def __init__(self, *, chunked: bool = False, close_after: int = 0) -> None:
        self.connections = 0
        self.chunked = chunked
        self.close_after = close_after
        # Connections opened before the current generation are dropped at their next
        # request, unanswered (as a proxy does whose backend restarted).
        self.generation = 0
        self.delay = 0.0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        born = self.generation
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if born != self.generation:
                    break
                await asyncio.sleep(self.delay)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                body = await reader.readexactly(length)
                if self.chunked:
                    half = len(body) // 2
                    parts = [body[:half], body[half:]]
                    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p)
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    writer.write(chunks + b"0\r\n\r\n")
                else:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                await writer.drain()
                answered += 1
                if self.close_after and answered >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def serving() -> AsyncIterator[tuple[Server, str]]:
    server = Server()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield server, f"http://127.0.0.1:{port}/mcp"
    finally:
        listener.close()


async def test_requests_reuse_one_connection(serving: tuple[Server, str]) -> None:
    server, url = serving
    pool = Http1Pool()
    for n in range(3):
        answer = await pool.request("POST", url, {}, b"hello %d" % n, 5)
        assert (answer.status, answer.body) == (200, b"hello %d" % n)
    assert server.connections == 1
    await pool.aclose()


async def test_a_chunked_answer_is_read_whole(serving: tuple[Server, str]) -> None:
    server, url = serving
    server.chunked = True
    pool = Http1Pool()
    assert (await pool.request("POST", url, {}, b"abcdef", 5)).body == b"abcdef"
    assert (await pool.request("POST", url, {}, b"xy", 5)).body == b"xy"
    assert server.connections == 1
    await pool.aclose()


async def test_a_connection_the_server_closed_is_not_reused(serving: tuple[Server, str]) -> None:
    server, url = serving
    server.close_after = 1
    pool = Http1Pool()
    await pool.request("POST", url, {}, b"one", 5)
    await asyncio.sleep(0.05)  # the server's close arrives
    assert (await pool.request("POST", url, {}, b"two", 5)).body == b"two"
    assert server.connections == 2
    await pool.aclose()


async def test_no_answer_in_time_is_a_failure_that_was_sent() -> None:
    done = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        await done.wait()  # never answers
        writer.close()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    pool = Http1Pool()
    with pytest.raises(HttpFailure, match="no answer within") as failure:
        await pool.request("POST", f"http://127.0.0.1:{port}/", {}, b"x", 0.2)
    assert failure.value.sent
    done.set()
    listener.close()
    await listener.wait_closed()
    await pool.aclose()


async def test_an_unreachable_server_is_endpoint_unavailable() -> None:
    client = McpClient()
    with pytest.raises(EndpointUnavailable, match="no MCP session"):
        await client.call_tool("http://127.0.0.1:1/mcp", "status", {})
    await client.aclose()


async def test_plain_http_goes_through_the_environments_proxy_but_loopback_never_does(
    serving: tuple[Server, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.forward_proxy import forward_proxy

    _server, url = serving
    local = url.split("//", 1)[1].split("/", 1)[0]
    seen: list[str] = []

    def lookup(host: str, port: int) -> str | None:
        seen.append(f"{host}:{port}")
        return local if host == "butler.ns.svc" else None

    async with forward_proxy(lookup) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        pool = Http1Pool()
        try:
            answer = await pool.request(
                "POST", "http://butler.ns.svc:40102/mcp", {}, b"through", timeout=5
            )
            assert (answer.status, answer.body) == (200, b"through")
            assert seen == ["butler.ns.svc:40102"]
            direct = await pool.request("POST", url, {}, b"direct", timeout=5)
            assert direct.body == b"direct" and seen == ["butler.ns.svc:40102"]
        finally:
            await pool.aclose()


async def test_after_a_dropped_kept_alive_connection_the_next_request_connects_anew(
    serving: tuple[Server, str],
) -> None:
    """A server restart behind a proxy leaves every kept-alive connection stale: the first
    request on one fails, and the pool then drops the others, so the next one succeeds."""
    server, url = serving
    server.delay = 0.1
    pool = Http1Pool()
    await asyncio.gather(*(pool.request("POST", url, {}, b"warm", 5) for _ in range(3)))
    assert server.connections == 3
    server.delay, server.generation = 0.0, 1
    with pytest.raises(HttpFailure):
        await pool.request("POST", url, {}, b"stale", 5)
    assert (await pool.request("POST", url, {}, b"fresh", 5)).body == b"fresh"
    assert server.connections == 4
    await pool.aclose()
