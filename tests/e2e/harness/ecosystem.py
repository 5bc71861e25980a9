"""What an e2e test sees of an ecosystem: endpoints, MCP clients and database access."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from fastmcp import Client
from fastmcp.client.transports import SSETransport, StreamableHttpTransport

from butlers.db.pool import create_pool
from tests.support.fastmcp_clients import ClientCache

USER = object()  # `EcosystemHandle.client(..., token=USER)`: the user's token


@dataclass(frozen=True)
class ButlerEndpoint:
    name: str
    url: str  # streamable HTTP, .../mcp
    sse_url: str
    port: int
    schema: str
    dsn: str  # the butler's own role
    # The URL the butler registers with the switchboard, where it differs from `url`
    # (on kind, its Service's in-cluster address; `url` is a port-forward on loopback).
    in_cluster_url: str | None = None

    @property
    def registered_url(self) -> str:
        return self.in_cluster_url or self.url


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@dataclass
class EcosystemHandle:
    """Backend-neutral access to a running ecosystem.

    A backend supplies the tokens its butlers accept: `token` is the user's (full
    access, the one `ecosystem.json` records), `butler_tokens` what each butler
    presents to others (to the switchboard when it registers; the switchboard's to
    the butlers it routes to). Every call through `call`/`clients` carries the
    user's token; `client(..., token=...)` speaks as anyone else, or as nobody.
    """

    backend: str
    endpoints: dict[str, ButlerEndpoint]
    admin_dsn: str
    kill: Callable[[str], Awaitable[None]]
    restart: Callable[[str], Awaitable[None]]
    token: str | None = field(default=None, repr=False)
    butler_tokens: dict[str, str] = field(default_factory=dict, repr=False)
    # Where the butlers' logs are on this machine (None: they are not, e.g. on kind).
    log_dir: Path | None = None
    span_dir: Path | None = None  # where butlers write their spans (JSON lines)
    schema_prefix: str = ""  # of this session's schemas and roles (solo butlers use it too)
    # The process id of a butler when it runs on this machine (None: it does not).
    pid: Callable[[str], int | None] = lambda _name: None
    # The dashboard over this ecosystem (its root URL, ending in "/"); None: not running.
    dashboard_url: str | None = None
    # Its bearer token (None: it runs without one, on loopback).
    dashboard_token: str | None = field(default=None, repr=False)
    # The dashboard role's DSN and its own schema (to run more dashboards in tests).
    dashboard_dsn: str | None = None
    dashboard_schema: str | None = None
    # Kill and restart the dashboard (None: this backend cannot).
    kill_dashboard: Callable[[], Awaitable[None]] | None = None
    restart_dashboard: Callable[[], Awaitable[None]] | None = None
    # Create and delete a Butler resource in the ecosystem's namespace (None: this backend
    # has no cluster); the deletion also drops the Butler's schema.
    apply_butler: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    delete_butler: Callable[[str], Awaitable[None]] | None = None
    # The keyring file the butlers and the dashboard read (None: not on this machine).
    secrets_key_file: Path | None = None
    # Give every butler and the dashboard this keyring as an operator's user does (the
    # namespace's Secret edited, the rolled pods Ready, the dashboard restarted); None:
    # this backend's keyring is `secrets_key_file`, read again while running.
    set_secrets_keyring: Callable[[str], Awaitable[None]] | None = None
    # The cluster namespace the ecosystem runs in (None: it runs on this machine).
    namespace: str | None = None
    # Where a butler this machine runs listens when the ecosystem's butlers call it (a
    # solo registered as the messenger): (address, port; None: any free one). On kind, the
    # host's address on kind's network and the port its NetworkPolicies let pods reach.
    host_listener: tuple[str, int | None] = ("127.0.0.1", None)
    clients: ClientCache = field(init=False)
    _pools: dict[str, asyncpg.Pool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.clients = ClientCache(headers=bearer(self.token))

    def client(
        self, butler: str, *, token: object = USER, sse: bool = False, timeout: float = 60
    ) -> Client[Any]:
        """A new MCP client of `butler` speaking with `token` (the user's by default;
        None: no token at all). Use it as `async with handle.client(...) as c:`."""
        chosen = self.token if token is USER else token
        headers = bearer(chosen if isinstance(chosen, str) else None)
        endpoint = self.endpoints[butler]
        transport = (
            SSETransport(endpoint.sse_url, headers=headers)
            if sse
            else StreamableHttpTransport(endpoint.url, headers=headers)
        )
        return Client(transport, timeout=timeout)

    def __getitem__(self, name: str) -> ButlerEndpoint:
        return self.endpoints[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.endpoints)

    @property
    def names(self) -> list[str]:
        return sorted(self.endpoints)

    async def call(self, butler: str, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call a tool over the butler's persistent MCP client; returns the decoded result."""
        result = await self.clients.call_tool(self.endpoints[butler].url, tool, arguments)
        return result.data

    async def call_raw(
        self, butler: str, tool: str, arguments: Mapping[str, Any] | None = None
    ) -> Any:
        """The whole CallToolResult, errors returned instead of raised."""
        return await self.clients.call_tool(
            self.endpoints[butler].url, tool, arguments, raise_on_error=False
        )

    async def pool(self, butler: str) -> asyncpg.Pool:
        """A pool connected as the butler's own role, on its schema."""
        if butler not in self._pools:
            endpoint = self.endpoints[butler]
            self._pools[butler] = await create_pool(endpoint.dsn, endpoint.schema, max_size=4)
        return self._pools[butler]

    async def admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.admin_dsn)

    async def close(self) -> None:
        await self.clients.close()
        for pool in self._pools.values():
            await pool.close()
        self._pools.clear()


def decode(result: Any) -> Any:
    """A tool result's value, whether structured or JSON text."""
    data = getattr(result, "data", result)
    if isinstance(data, str):
        try:
            return json.loads(data)
        except ValueError:
            return data
    return data
