"""A TCP proxy that simulates connection loss, for resilience tests.

`DroppingProxy` forwards bytes both ways between its clients and one server. Armed
with `drop_after(marker)`, it forwards the next client→server data containing
`marker` (the request was sent), waits for `before_drop()` (e.g. until the server
has started the work), then aborts both sides of that connection: the client sees
a connection reset with no answer, exactly as when a network path fails mid-call.

`cut()` takes the server away for everyone (every open connection aborted, new ones
refused, as when the server dies) until `restore()`; `refused` counts the attempts
made meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

Hook = Callable[[], Awaitable[None]]
MARKER_WINDOW = 256 * 1024  # bytes of a connection's recent traffic searched for the marker


class DroppingProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._marker: bytes | None = None
        self._before_drop: Hook | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.dropped = asyncio.Event()
        self.connections = 0
        self.refused = 0
        self.port = 0  # the listening port, once started
        self._cut = False

    def cut(self) -> None:
        """The server is gone: abort every connection, refuse new ones until `restore`."""
        self._cut = True
        for writer in list(self._writers):
            writer.transport.abort()

    def restore(self) -> None:
        self._cut = False

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on `host` (loopback by default) and `port` (0: a free one); returns it."""
        self._server = await asyncio.start_server(self._handle, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def drop_after(self, marker: bytes, before_drop: Hook | None = None) -> None:
        """Drop the connection carrying the next request that contains `marker`, once."""
        self._marker, self._before_drop = marker, before_drop
        self.dropped.clear()

    async def aclose(self) -> None:
        """Stop listening and cut every open connection (their handlers then finish)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self._cut:
            self.refused += 1
            client_w.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        self._writers.add(client_w)
        try:
            server_r, server_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.transport.abort()
            self._writers.discard(client_w)
            self._tasks.discard(task)
            return
        self._writers.add(server_w)
        drop = asyncio.Event()

        async def upstream() -> None:
            seen = b""
            while data := await _read(client_r):
                server_w.write(data)
                await server_w.drain()
                seen = (seen + data)[-MARKER_WINDOW:]
                if self._marker is not None and self._marker in seen:
                    self._marker = None
                    if self._before_drop is not None:
                        await self._before_drop()
                    drop.set()
                    return

        async def downstream() -> None:
            while data := await _read(server_r):
                client_w.write(data)
                await client_w.drain()

        pumps = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        dropper = asyncio.create_task(drop.wait())
        try:
            await asyncio.wait([*pumps, dropper], return_when=asyncio.FIRST_COMPLETED)
            if drop.is_set():
                client_w.transport.abort()
                server_w.transport.abort()
                self.dropped.set()
            else:
                await asyncio.wait(pumps, timeout=1.0)
        finally:
            for pending in (*pumps, dropper):
                pending.cancel()
            await asyncio.gather(*pumps, dropper, return_exceptions=True)
            for writer in (client_w, server_w):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()
            self._tasks.discard(task)


async def _read(reader: asyncio.StreamReader) -> bytes:
    """The next bytes, or b"" once the connection ended (closed or reset)."""
    try:
        return await reader.read(65536)
    except ConnectionError:
        return b""
