"""An HTTP forward proxy that stands in for cluster DNS, for processes that learn URLs late.

Pods on this machine reach Services through addresses rewritten in their
environment; a process that learns a Service URL at run time (the dashboard reads
each Butler's `status.endpoint` from the API) cannot be rewritten that way. Given
`HTTP_PROXY` pointing here, its requests for `http://name.namespace.svc:port/...`
arrive in absolute form; `lookup` turns `host:port` into the local address serving
it (None: connect to it as named). One request per connection (`Connection:
close` upstream), bytes piped both ways, so streamed responses (SSE) stream. A
name that cannot be reached is a reset connection, as from kube-proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "proxy-authorization"}
Lookup = Callable[[str, int], str | None]


def rewrite_head(head: bytes) -> tuple[str, int, bytes]:
    """(host, port, the request head in origin form with `Connection: close`)."""
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, version = request_line.split(" ", 2)
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError(f"not an absolute http URL: {target!r}")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [
        line for line in lines if line and line.split(":", 1)[0].strip().lower() not in HOP_BY_HOP
    ]
    out = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
    return url.hostname, url.port or 80, out.encode("latin-1")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        await _close(writer)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), CONNECT_TIMEOUT)


class ForwardProxy:
    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            host, port, request = rewrite_head(head)
            target = self.lookup(host, port) or f"{host}:{port}"
            target_host, target_port = target.rsplit(":", 1)
            try:
                upstream_reader, upstream_writer = await asyncio.wait_for(
                    asyncio.open_connection(target_host, int(target_port)), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError):
                # As kube-proxy does for a Service without a Ready endpoint: the connection
                # is refused (reset), not answered; the client sees the butler down.
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            upstream_writer.write(request)
            await upstream_writer.drain()
            upload = asyncio.create_task(_pipe(reader, upstream_writer))
            try:
                await _pipe(upstream_reader, writer)
            finally:
                upload.cancel()
                with contextlib.suppress(BaseException):
                    await upload
                await _close(upstream_writer)
        except (asyncio.IncompleteReadError, TimeoutError, ValueError, ConnectionError):
            pass
        finally:
            await _close(writer)
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def forward_proxy(lookup: Lookup) -> AsyncIterator[ForwardProxy]:
    proxy = ForwardProxy(lookup)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
