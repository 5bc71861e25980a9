"""FastMCP clients kept per endpoint for the e2e harness: the tests speak to butlers
through FastMCP's own client too (what many users run), while butlers themselves use
`butlers.mcp_clients`. Each client lives inside its own owner task (the MCP
client's context must be entered and exited by the same task); callers in any
task use it. A client that fails at the transport level (the butler restarted
or died) is dropped and reopened.

Retries never run a call twice: a call the server refused unseen (its MCP session
expired or the butler restarted: "Session terminated") is repeated on a fresh
client; a call whose connection failed after the request was sent may have run,
so it is repeated only when the caller says it is idempotent (a read, or a write
carrying an idempotency key the server deduplicates).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import httpx2 as httpx
from fastmcp import Client
from fastmcp.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST

log = logging.getLogger(__name__)
OPEN_TIMEOUT = 10.0
CONNECTION_CLOSED = -32000  # JSON-RPC code the MCP client uses for a dropped connection


class EndpointUnavailable(ConnectionError):
    """The MCP endpoint could not be reached."""


class OutcomeUnknown(EndpointUnavailable):
    """The connection failed after the call was sent: it may or may not have run."""


def _refused_unseen(exc: BaseException) -> bool:
    """The server answered 404 for the MCP session: it never saw the call."""
    return (
        isinstance(exc, MCPError)
        and exc.error.code == INVALID_REQUEST
        and exc.error.message == "Session terminated"
    )


class _Owned:
    """One open client and the task that owns its context."""

    def __init__(self, url: str, headers: Mapping[str, str] | None, timeout: float) -> None:
        self.url = url
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self.client: Client[Any] | None = None
        self._task = asyncio.create_task(self._own(), name=f"mcp-client {url}")

    async def _own(self) -> None:
        try:
            from fastmcp.client.transports import StreamableHttpTransport

            transport = StreamableHttpTransport(self.url, headers=self._headers)
            async with Client(transport, timeout=self._timeout) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # reported to whoever waits in opened()
            self._error = exc
            self._ready.set()
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.client = None

    async def opened(self) -> Client[Any]:
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise EndpointUnavailable(
                f"{self.url}: no MCP session within {OPEN_TIMEOUT} s"
            ) from None
        if self.client is None:
            raise EndpointUnavailable(f"{self.url}: {self._error}") from self._error
        return self.client

    async def close(self) -> None:
        self._stop.set()
        if not self._task.done():
            try:
                async with asyncio.timeout(5):
                    await asyncio.shield(self._task)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task


class ClientCache:
    """MCP clients keyed by URL, opened on first use and replaced when stale."""

    def __init__(self, *, timeout: float = 60.0, headers: Mapping[str, str] | None = None) -> None:
        self._timeout = timeout
        self._headers = headers
        self._clients: dict[str, _Owned] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.opened_count = 0

    async def get(self, url: str) -> Client[Any]:
        lock = self._locks.setdefault(url, asyncio.Lock())
        async with lock:
            owned = self._clients.get(url)
            if owned is None:
                owned = _Owned(url, self._headers, self._timeout)
                self._clients[url] = owned
                self.opened_count += 1
            try:
                return await owned.opened()
            except EndpointUnavailable:
                self._clients.pop(url, None)
                raise

    @property
    def cached_count(self) -> int:
        return len(self._clients)

    async def drop(self, url: str) -> None:
        owned = self._clients.pop(url, None)
        if owned is not None:
            await owned.close()

    async def call_tool(
        self,
        url: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        idempotent: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Call a tool; a stale client is replaced and the call repeated once when that
        cannot run it twice (see the module docstring). Tool errors are never retried.
        """
        for attempt in (1, 2):
            client = await self.get(url)  # EndpointUnavailable: nothing was sent
            try:
                return await client.call_tool(name, dict(arguments or {}), **kwargs)
            except ToolError:
                raise
            except (httpx.HTTPError, OSError, RuntimeError, MCPError, EndpointUnavailable) as exc:
                await self.drop(url)
                unseen = _refused_unseen(exc)
                if attempt == 1 and (unseen or idempotent):
                    log.info("MCP client for %s is stale (%s); reopening", url, exc)
                    continue
                if isinstance(exc, MCPError) and exc.error.code != CONNECTION_CLOSED and not unseen:
                    raise  # the server answered with a protocol error: not a transport fault
                if unseen:
                    raise EndpointUnavailable(f"{url}: the server refused the session") from exc
                raise OutcomeUnknown(
                    f"{url}: {exc.__class__.__name__}: {exc} (the connection failed after "
                    f"{name} was sent; not repeated, since it may have run)"
                    if not idempotent
                    else f"{url}: {exc.__class__.__name__}: {exc}"
                ) from exc
        raise AssertionError("unreachable")

    async def close(self) -> None:
        owned, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(o.close() for o in owned), return_exceptions=True)
