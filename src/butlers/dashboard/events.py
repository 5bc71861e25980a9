"""Server-Sent Events: the broker every part of the dashboard publishes to.

Each event gets an increasing id and goes into a bounded replay buffer, so a
client reconnecting with `Last-Event-ID` receives what it missed; when that id
is older than the buffer (or unknown), the client gets a `resync` event telling
it to reload everything. Each subscriber has a bounded queue: a subscriber too
slow to keep up is dropped (its stream ends; it reconnects and replays).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger(__name__)
# Every event type the stream carries: published in the API's schema (`SseEvent.type`),
# from which the web UI's list is derived.
EventType = Literal[
    "connected",
    "resync",
    "butler_status",
    "session_start",
    "session_end",
    "approval_requested",
    "approval_decided",
    "message_accepted",
    "message_classified",
    "message_done",
    "schedule_changed",
    "state_changed",
    "feed_status",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    data: dict[str, Any]
    at: float = field(default_factory=time.time)

    def encode(self) -> bytes:
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"), default=str)
        return f"id: {self.id}\nevent: {self.type}\ndata: {payload}\n\n".encode()


def comment(text: str) -> bytes:
    return f": {text}\n\n".encode()


def unnumbered(event_type: str, data: dict[str, Any]) -> bytes:
    """An event without an id (does not move the client's Last-Event-ID)."""
    return f"event: {event_type}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class Subscription:
    def __init__(self, queue_size: int) -> None:
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=queue_size)
        self.dropped = False


class EventBroker:
    def __init__(
        self,
        *,
        buffer_size: int = 1000,
        queue_size: int = 256,
        mask: Callable[[Any], Any] = lambda value: value,
    ) -> None:
        # Ids increase across restarts of the dashboard too (they start from the clock).
        self._next_id = int(time.time() * 1000) * 1000
        self._buffer: deque[Event] = deque(maxlen=buffer_size)
        self._queue_size = queue_size
        self._subscribers: set[Subscription] = set()
        self._mask = mask
        self.published = 0

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    @property
    def last_id(self) -> int | None:
        return self._buffer[-1].id if self._buffer else None

    def publish(self, event_type: str, data: dict[str, Any]) -> Event:
        self._next_id += 1
        event = Event(self._next_id, event_type, self._mask(data))
        self._buffer.append(event)
        self.published += 1
        for sub in list(self._subscribers):
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                log.warning("SSE subscriber too slow (queue full); dropping it")
                self._drop(sub)
        return event

    def _drop(self, sub: Subscription) -> None:
        sub.dropped = True
        self._subscribers.discard(sub)
        while True:  # make room for the end marker
            try:
                sub.queue.get_nowait()
            except asyncio.QueueEmpty:
                break
        sub.queue.put_nowait(None)

    def subscribe(self, last_event_id: str | None) -> tuple[Subscription, list[Event], bool]:
        """A new subscription, the events to replay, and whether the client must resync."""
        sub = Subscription(self._queue_size)
        self._subscribers.add(sub)
        replay, resync = self._replay(last_event_id)
        return sub, replay, resync

    def _replay(self, last_event_id: str | None) -> tuple[list[Event], bool]:
        if last_event_id is None or not last_event_id.strip():
            return [], False
        try:
            last = int(last_event_id.strip())
        except ValueError:
            return [], True
        if not self._buffer:
            return [], last != self._next_id
        first = self._buffer[0].id
        if last < first - 1 or last > self._buffer[-1].id:
            return list(self._buffer), True
        return [e for e in self._buffer if e.id > last], False

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)


class EventStreamResponse(Response):
    """`text/event-stream` of one subscription, ended when the client disconnects."""

    media_type = "text/event-stream"

    def __init__(
        self,
        broker: EventBroker,
        last_event_id: str | None,
        keepalive: float,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._broker = broker
        self._last_event_id = last_event_id
        self._keepalive = keepalive
        self._extra_headers = {**SSE_HEADERS, **(headers or {})}
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
        headers += [(k.lower().encode(), v.encode()) for k, v in self._extra_headers.items()]
        sub, replay, resync = self._broker.subscribe(self._last_event_id)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            async with anyio.create_task_group() as group:

                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                async def body(chunk: bytes) -> None:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})

                group.start_soon(watch_disconnect)
                try:
                    await self._stream(sub, replay, resync, body)
                except OSError:
                    pass  # the client went away mid-write
                group.cancel_scope.cancel()
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._broker.unsubscribe(sub)

    async def _stream(
        self,
        sub: Subscription,
        replay: list[Event],
        resync: bool,
        body: Callable[[bytes], Awaitable[None]],
    ) -> None:
        await body(b"retry: 2000\n\n" + unnumbered("connected", {"status": "ok"}))
        if resync:
            await body(unnumbered("resync", {"reason": "events were missed; reload"}))
        for event in replay:
            await body(event.encode())
        while True:
            try:
                item = await asyncio.wait_for(sub.queue.get(), self._keepalive)
            except TimeoutError:
                await body(comment("keepalive"))
                continue
            if item is None:  # dropped as too slow: end the stream, the client reconnects
                return
            await body(item.encode())
