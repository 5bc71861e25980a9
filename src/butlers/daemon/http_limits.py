"""Bounds on what one HTTP client can make a butler hold: time and memory.

- `HeaderTimeoutProtocol`: a connection must deliver a request's headers within
  `HEADER_TIMEOUT` seconds of opening (or of starting the next request), else it is
  closed. uvicorn times out only idle keep-alive connections, so a client sending
  headers a byte at a time (slowloris), or nothing at all, held a connection forever.
  It also tells the server's `admission.Admission` when a connection waits for headers
  and offers the auth gate a way to admit it (`ADMIT_KEY`).
- `BodyLimit`: a request body is read within `BODY_TIMEOUT` seconds (408 after), and
  at most `MAX_BODY_BYTES` of it (413; the MCP SDK's own limit, which has no deadline:
  a client announcing a body and sending it a byte at a time held a request forever).
- Open connections are capped by `admission.Admission`: those without a valid token
  yet separately (and per peer) from those with one, so sockets left silent cannot
  starve callers who present a token (uvicorn's `limit_concurrency` counted them all
  alike: 600 silent sockets made every caller a 503).
- Streamable-HTTP MCP sessions (kept by clients of the 2025 protocol) end after
  `SESSION_IDLE_TIMEOUT` idle seconds, and there are at most `MAX_SESSIONS` of them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from butlers.auth.http import ADMIT_KEY
from butlers.daemon.admission import Admission

HEADER_TIMEOUT = 5.0
BODY_TIMEOUT = 20.0
MAX_BODY_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
SESSION_IDLE_TIMEOUT = 300.0

Scope = dict[str, Any]
Message = dict[str, Any]


def admission_of(server_state: Any) -> Admission:
    """The admission book of one uvicorn server (kept on its shared state)."""
    admission: Admission | None = getattr(server_state, "butlers_admission", None)
    if admission is None:
        admission = Admission.sized()
        server_state.butlers_admission = admission
    return admission


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request's headers, and
    the admission of connections (see `admission`)."""

    header_timeout = HEADER_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._admission = admission_of(self.server_state)
        self._peer = ""

    def _admit(self) -> bool:
        return self._admission.admit(self)

    def _waits(self) -> None:
        if not self._admission.is_admitted(self):
            self._admission.wait(self, self._peer)

    def close_pending(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _expired(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection that sent no complete request headers")
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._coalescing = _HeadWithBody(transport, self.loop)
        self._peer = self.client[0] if self.client else ""
        self._arm()
        self._waits()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()
        if not self._admission.is_admitted(self):
            self._admission.wait(self, self._peer)
            self.scope[ADMIT_KEY] = self._admit  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._disarm()
        self._admission.working(self)
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.transport is self.transport:
            self.cycle.transport = self._coalescing  # type: ignore[assignment]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._waits()  # a stranger's idle keep-alive connection counts as waiting

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._admission.gone(self)
        super().connection_lost(exc)


class _HeadWithBody:
    """The transport as a response sees it: the status line and headers go out with the
    first body bytes in one write (uvicorn writes them separately: two segments, and a
    client woken twice), or on the loop's next turn when no body follows (HEAD, 100
    Continue, a stream that is slow to start)."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data.startswith(b"HTTP/") and data.endswith(b"\r\n\r\n"):
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BodyLimit:
    """ASGI middleware: a request body is read whole, within a deadline and a size."""

    def __init__(
        self, app: Any, max_bytes: int = MAX_BODY_BYTES, timeout: float = BODY_TIMEOUT
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            message = f"request body is {declared} bytes; the limit is {self.max_bytes}"
            await _refuse(send, 413, message)
            return
        chunks: list[bytes] = []
        size = 0
        # `asyncio.timeout` without its context manager's bookkeeping (~2 us a request):
        # a timer that cancels this task, told apart from any other cancellation.
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        deadline = task.get_loop().call_later(self.timeout, expire)
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError:
            if not expired or task.uncancel() > cancelling:
                raise  # cancelled by someone else
            deadline.cancel()
            await _refuse(send, 408, f"request body not received within {self.timeout:g} s")
            return
        finally:
            deadline.cancel()
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            message: Message = await receive()  # after the body: the disconnect, when it comes
            return message

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
