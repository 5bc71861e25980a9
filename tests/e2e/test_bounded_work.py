"""Bounded work at a butler's HTTP door: what one client can make a butler hold."""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import urlsplit

import httpx2 as httpx

from butlers.daemon.http_limits import BODY_TIMEOUT, HEADER_TIMEOUT
from butlers.testing.script_server import Script, step
from tests.support.raw_mcp import RawMcpSession

from .harness.ecosystem import EcosystemHandle


async def test_a_client_that_never_finishes_its_headers_is_disconnected(
    butler_ecosystem: EcosystemHandle,
) -> None:
    target = urlsplit(butler_ecosystem["health"].url)
    reader, writer = await asyncio.open_connection(target.hostname, target.port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    await writer.drain()
    started = time.monotonic()

    async def dribble() -> None:  # one byte a second: never a whole header block
        while True:
            await asyncio.sleep(1.0)
            writer.write(b"a")
            await writer.drain()

    slowloris = asyncio.create_task(dribble())
    try:
        try:
            answer = await asyncio.wait_for(reader.read(), timeout=HEADER_TIMEOUT + 20)
        except ConnectionResetError:
            # A byte dribbled after the butler closed draws a reset: disconnected all the same.
            answer = b""
    finally:
        slowloris.cancel()
        await asyncio.gather(slowloris, return_exceptions=True)
        writer.close()
    elapsed = time.monotonic() - started
    assert answer == b"" and elapsed < HEADER_TIMEOUT + 10, (answer, elapsed)


async def test_a_client_that_never_finishes_its_body_gets_a_timeout(
    butler_ecosystem: EcosystemHandle,
) -> None:
    target = urlsplit(butler_ecosystem["health"].url)
    reader, writer = await asyncio.open_connection(target.hostname, target.port)
    authorization = f"Authorization: Bearer {butler_ecosystem.token}\r\n".encode()
    writer.write(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + authorization
        + b"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n["
    )
    await writer.drain()
    started = time.monotonic()

    async def dribble() -> None:  # one byte a second of a 100 kB body
        while True:
            await asyncio.sleep(1.0)
            writer.write(b" ")
            await writer.drain()

    slow = asyncio.create_task(dribble())
    try:
        answer = await asyncio.wait_for(reader.read(), timeout=BODY_TIMEOUT + 20)
    finally:
        slow.cancel()
        await asyncio.gather(slow, return_exceptions=True)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < BODY_TIMEOUT + 10


FLOOD = 600  # sockets an attacker holds open without a token, reopening each one closed


async def _hold_sockets(host: str, port: int, count: int, stop: asyncio.Event) -> None:
    """Keep `count` connections open that present no token and never finish a request
    (half send nothing, half the start of a header block); reopen each one the butler
    closes, until `stop`."""

    async def one(index: int) -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            if index % 2:
                writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            closed = asyncio.create_task(reader.read())
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({closed, stopped}, return_when=asyncio.FIRST_COMPLETED)
            closed.cancel()
            stopped.cancel()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    await asyncio.gather(*(one(i) for i in range(count)))


async def test_sockets_left_open_without_a_token_do_not_starve_callers_with_one(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """An attacker holding 600 silent sockets on the switchboard and on a target (and
    reopening those closed) does not make either answer 503: a caller with a token still
    gets its `tools/call` answered on a new connection, and a routed message reaches the
    target (switchboard → general)."""
    stop = asyncio.Event()
    floods = []
    for name in ("switchboard", "general"):
        target = urlsplit(butler_ecosystem[name].url)
        assert target.hostname and target.port
        floods.append(asyncio.create_task(_hold_sockets(target.hostname, target.port, FLOOD, stop)))
    try:
        # Past the keep-alive timeout, so no connection opened before the flood is reused.
        await asyncio.sleep(6.0)
        headers = {"Authorization": f"Bearer {butler_ecosystem.token}"}
        async with asyncio.timeout(60):
            async with httpx.AsyncClient(timeout=30, headers=headers) as client:
                session = RawMcpSession(butler_ecosystem["general"].url, client)
                await session.open()
                reply = await session.call_tool("state_get", '{"key": "e2e-flood"}')
            assert "result" in reply and not reply["result"].get("isError"), reply
            llm_script.route("general", step("routed through the flood"))
            routed = await butler_ecosystem.call(
                "switchboard", "route", {"butler": "general", "prompt": "ping"}
            )
            assert routed["status"] == "success", routed
    finally:
        stop.set()
        await asyncio.gather(*floods, return_exceptions=True)
