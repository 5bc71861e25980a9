"""Bounded work at a butler's HTTP door: what one client can make a butler hold."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from butlers.daemon.http_limits import BODY_TIMEOUT, HEADER_TIMEOUT

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
        answer = await asyncio.wait_for(reader.read(), timeout=HEADER_TIMEOUT + 20)
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
