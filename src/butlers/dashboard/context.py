"""`Dashboard`: the services one dashboard process runs, handed to every route.

Built by the app's lifespan (never at import time): the directory of butlers,
the database manager, the MCP clients, the audit log, the event broker, the
status monitor and the change feed. Routes get it with `Depends(dashboard)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from butlers.dashboard.audit import AuditLog
from butlers.dashboard.db import DatabaseManager
from butlers.dashboard.directory import ButlerInfo, Directory
from butlers.dashboard.errors import ButlerNotFound, DashboardError
from butlers.dashboard.events import EventBroker
from butlers.dashboard.feed import ChangeFeed
from butlers.dashboard.mcp import ButlerClients, ToolOutcome
from butlers.dashboard.monitor import ButlerMonitor
from butlers.dashboard.oauth_flow import OAuthFlows
from butlers.dashboard.shared_secrets import SharedSecrets
from butlers.redaction import Redactor
from butlers.settings import DashboardSettings

log = logging.getLogger(__name__)


@dataclass
class Dashboard:
    settings: DashboardSettings
    directory: Directory
    db: DatabaseManager
    clients: ButlerClients
    audit: AuditLog
    broker: EventBroker
    monitor: ButlerMonitor
    feed: ChangeFeed
    redactor: Redactor
    shared: SharedSecrets
    oauth: OAuthFlows = field(default_factory=OAuthFlows)
    started_at: float = field(default_factory=time.time)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    # -- butlers ------------------------------------------------------------------

    def butlers(self) -> dict[str, ButlerInfo]:
        return self.directory.butlers()

    def butler(self, name: str) -> ButlerInfo:
        info = self.directory.butlers().get(name)
        if info is None:
            known = ", ".join(sorted(self.directory.butlers())) or "none"
            raise ButlerNotFound(f"no butler named {name!r} (known: {known})", butler=name)
        return info

    def with_module(self, module: str) -> list[str]:
        """Names of the butlers that enable `module` (fan-outs over its tables hit only those)."""
        return sorted(n for n, b in self.directory.butlers().items() if module in b.modules)

    def sync_pools(self) -> None:
        butlers = self.directory.butlers()
        for name, info in butlers.items():
            self.db.add_butler(name, info.schema)
        for name in set(self.db.names) - set(butlers):
            asyncio.get_running_loop().create_task(self.db.remove_butler(name))

    async def aclose(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.clients.close()
        await self.db.close()
        closer = getattr(self.directory, "aclose", None)
        if closer is not None:
            await closer()

    # -- writes -------------------------------------------------------------------

    async def write(
        self,
        request: Request,
        butler: ButlerInfo,
        operation: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        target: str | None = None,
        timeout: float | None = None,
        audited: dict[str, Any] | None = None,
    ) -> ToolOutcome:
        """Call the owning butler's tool for a write, and audit it whatever the outcome
        (with `audited` in place of the arguments when they hold a secret)."""
        started = time.monotonic()
        error: str | None = None
        try:
            return await self.clients.call(butler, tool, arguments, timeout=timeout)
        except DashboardError as exc:
            error = f"{exc.code}: {exc.message}"
            if exc.code == "BUTLER_UNREACHABLE":
                self.monitor.poke()
            raise
        finally:
            await self.audit.record(
                actor=actor(request),
                butler=butler.name,
                operation=operation,
                target=target,
                request={"tool": tool, "arguments": arguments if audited is None else audited},
                ok=error is None,
                error=error,
                duration_ms=round((time.monotonic() - started) * 1000),
                client=request.client.host if request.client else None,
            )


def actor(request: Request) -> str:
    """Who is acting: set by the authentication middleware."""
    return str(request.scope.get("state", {}).get("actor") or "anonymous")


def get_dashboard(request: Request) -> Dashboard:
    dashboard: Dashboard = request.app.state.dashboard
    return dashboard


Ctx = Annotated[Dashboard, Depends(get_dashboard)]
