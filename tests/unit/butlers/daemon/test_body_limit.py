"""`BodyLimit`: a body is read whole, within its deadline and size; other cancellations pass."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from butlers.daemon.http_limits import BodyLimit

Message = dict[str, Any]


async def _inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = (await receive())["body"]
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def _scope(length: int) -> dict[str, Any]:
    headers = [(b"content-length", str(length).encode())]
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}


async def _call(limit: BodyLimit, parts: list[Message], stall: bool) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        if parts:
            return parts.pop(0)
        if stall:
            await asyncio.sleep(3600)  # a client that stops sending mid-body
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await limit(_scope(10), receive, send)
    return sent


async def test_a_body_in_parts_is_delivered_whole() -> None:
    parts = [
        {"type": "http.request", "body": b"12345", "more_body": True},
        {"type": "http.request", "body": b"67890", "more_body": False},
    ]
    sent = await _call(BodyLimit(_inner, timeout=5), parts, stall=False)
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"1234567890"


async def test_a_stalled_body_is_refused_at_its_deadline() -> None:
    parts = [{"type": "http.request", "body": b"12345", "more_body": True}]
    loop = asyncio.get_running_loop()
    started = loop.time()
    sent = await asyncio.wait_for(_call(BodyLimit(_inner, timeout=0.2), parts, stall=True), 5)
    assert sent[0]["status"] == 408, sent
    assert "within 0.2 s" in json.loads(sent[1]["body"])["error"]
    assert loop.time() - started < 2
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_an_oversized_body_is_refused() -> None:
    parts = [{"type": "http.request", "body": b"x" * 11, "more_body": True}]
    sent = await _call(BodyLimit(_inner, max_bytes=10, timeout=5), parts, stall=True)
    assert sent[0]["status"] == 413, sent


async def test_another_cancellation_is_not_taken_for_the_deadline() -> None:
    parts = [{"type": "http.request", "body": b"12345", "more_body": True}]
    call = asyncio.ensure_future(_call(BodyLimit(_inner, timeout=5), parts, stall=True))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
