"""What an e2e test sees of an ecosystem: endpoints, MCP clients and database access."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from butlers.db.pool import create_pool
from butlers.mcp_clients import ClientCache


@dataclass(frozen=True)
class ButlerEndpoint:
    name: str
    url: str  # streamable HTTP, .../mcp
    sse_url: str
    port: int
    schema: str
    dsn: str  # the butler's own role


@dataclass
class EcosystemHandle:
    """Backend-neutral access to a running ecosystem."""

    backend: str
    endpoints: dict[str, ButlerEndpoint]
    admin_dsn: str
    kill: Callable[[str], Awaitable[None]]
    restart: Callable[[str], Awaitable[None]]
    # Where the butlers' logs are on this machine (None: they are not, e.g. on kind).
    log_dir: Path | None = None
    span_dir: Path | None = None  # where butlers write their spans (JSON lines)
    # The dashboard over this ecosystem (its root URL, ending in "/"); None: not running.
    dashboard_url: str | None = None
    # The dashboard role's DSN and its own schema (to run more dashboards in tests).
    dashboard_dsn: str | None = None
    dashboard_schema: str | None = None
    # Kill and restart the dashboard (None: this backend cannot).
    kill_dashboard: Callable[[], Awaitable[None]] | None = None
    restart_dashboard: Callable[[], Awaitable[None]] | None = None
    clients: ClientCache = field(default_factory=ClientCache)
    _pools: dict[str, asyncpg.Pool] = field(default_factory=dict)

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
