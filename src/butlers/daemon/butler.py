"""Building one butler in this process: the only place its parts are wired together.

`build_butler` is used by `butlers serve`, the integration fixtures and the
benchmarks, so each of them runs the same butler: its context, a FastMCP server
with the core tools, the session services (the spawner exists before any module
starts, so modules get it as a typed service), the modules in dependency order,
then `trigger`/`tick`/schedule tools, tool spans and the input-schema table.
Nothing runs in the background until `Butler.start()`; `aclose()` stops it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import asyncpg
from fastmcp import FastMCP

from butlers.auth.tokens import TokenBook
from butlers.core.context import ButlerContext
from butlers.core.secrets import SecretResolver
from butlers.core.services import SessionServices, build_session_services
from butlers.daemon.calls import SessionToolServer
from butlers.daemon.mcp_offer import McpToolOffer, register_load_tool
from butlers.daemon.recording import SessionCallRecorder
from butlers.daemon.routes import RouteCheck
from butlers.daemon.server import build_server, finalize_server, register_session_service_tools
from butlers.modules.base import ModuleServices, Webhook
from butlers.modules.loader import (
    ModuleSet,
    session_hidden_tools,
    session_tool_tiers,
    start_modules,
)
from butlers.modules.switch import ModuleSwitch, register_switch_tool
from butlers.scheduling.jobs import JobRegistry
from butlers.secretbox import KeySource
from butlers.settings import ButlerSettings
from butlers.spec import ButlerResource
from butlers.stores.modules import disabled_modules
from butlers.stores.starts import record_start, record_stop

log = logging.getLogger(__name__)


@dataclass
class Butler:
    """A built butler: what `serve` exposes over HTTP and tests reach in memory."""

    context: ButlerContext
    server: FastMCP
    services: SessionServices
    modules: ModuleSet
    routes: RouteCheck
    # Modules' push endpoints (path → handler), served beside /mcp.
    webhooks: dict[str, Webhook]
    # How often the secrets stores are checked for changes made by another process.
    secrets_reload_seconds: float = 10.0
    _watch: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.context.name

    async def start(self) -> None:
        """Background work: secrets masked in this process's logs, sessions a dead process
        left `running` marked interrupted, the scheduler loop, the watch on the secrets
        stores (changed values reach the modules while the butler runs). The start is
        recorded (numbered: restarts show in `status` and on the dashboard's timeline)."""
        self.context.start = await record_start(self.context.pool)
        if self.context.start.previous_crashed:
            log.warning(
                "restart #%d: the previous run (started %s) ended without stopping",
                self.context.start.restarts,
                self.context.start.previous_started_at,
            )
        await self.services.start()
        self.watch_secrets()

    def watch_secrets(self) -> None:
        """Check the secrets stores for changes every `secrets_reload_seconds` (once)."""
        secrets = self.context.secrets
        if secrets is not None and self._watch is None:
            self._watch = asyncio.create_task(
                secrets.watch(self.secrets_reload_seconds), name="secrets-watch"
            )

    async def aclose(self) -> None:
        """Stop the scheduler and sessions first (they call module tools), then modules."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        try:
            await self.services.aclose()
            if self.context.start is not None:
                with contextlib.suppress(OSError, asyncpg.PostgresError):
                    await record_stop(self.context.pool, self.context.start.number)
        finally:
            try:
                await self.modules.stop()
            finally:
                await self.routes.aclose()


async def build_butler(
    resource: ButlerResource,
    pool: asyncpg.Pool,
    settings: ButlerSettings,
    *,
    schema: str,
    mcp_url: str,
    jobs: JobRegistry | None = None,
) -> Butler:
    """Every part of one butler on `pool` (its schema at head), nothing started yet.

    `mcp_url` is the butler's own MCP endpoint, for runtimes that call back over HTTP
    (`claude-code`); the spec's schedules are synced into `scheduled_tasks`.
    """
    auth = settings.auth
    context = ButlerContext(
        resource=resource,
        schema=schema,
        pool=pool,
        environ=settings.environ,
        approval_timeout_seconds=settings.approval_timeout_seconds,
        tokens=TokenBook(
            user_digests=auth.user_tokens,
            switchboard_digest=auth.switchboard_token_sha256,
            registration_key=auth.registration_key,
        ),
        token=auth.token,
        google_token_url=settings.google.token_url,
    )
    context.secrets = SecretResolver(
        pool,
        KeySource(settings.secrets_key, settings.secrets_key_file),
        environ=settings.environ,
        shared_schema=settings.shared_secrets_schema,
    )
    await context.secrets.load()
    server = build_server(context)
    tiers = session_tool_tiers(resource.spec.modules)
    # Sessions that list tools over MCP (claude-code) get the loop's offer from the butler.
    mcp_offer = McpToolOffer(tiers)
    server.middleware.insert(0, mcp_offer)
    register_load_tool(server, mcp_offer)
    services = build_session_services(
        SessionToolServer(server, tiers),
        context,
        settings,
        mcp_url=mcp_url,
        jobs=jobs,
    )
    services.redactor.update([*services.redactor.secrets, *context.secrets.values.values()])
    shared = ModuleServices(
        spawner=services.spawner,
        redactor=services.redactor,
        switchboard_url=settings.switchboard_url,
        jobs=services.jobs,
    )
    modules = await start_modules(server, context, shared, await disabled_modules(pool))
    routes = RouteCheck(context, settings.switchboard_url)
    butler = Butler(
        context=context,
        server=server,
        services=services,
        modules=modules,
        routes=routes,
        webhooks=shared.webhooks,
        secrets_reload_seconds=settings.secrets_reload_seconds,
    )
    secrets = context.secrets

    async def mask(changed: frozenset[str]) -> None:
        """New values are masked in logs too (old ones stay masked)."""
        services.redactor.update([*services.redactor.secrets, *secrets.values.values()])

    secrets.listeners += [mask, modules.credentials_changed]
    try:
        register_session_service_tools(server, services, routes.refusal)
        await services.sync_schedules(resource.spec.schedules)
        # Tool calls of sessions whose runtime calls back over HTTP (claude-code).
        server.middleware.insert(0, SessionCallRecorder(services.spawner))
        switch = ModuleSwitch(server, context, modules, _unset_refresh)
        register_switch_tool(server, switch)
        switch.refresh = await finalize_server(
            server,
            context,
            services.redactor,
            session_hidden=session_hidden_tools(resource.spec.modules),
        )
    except BaseException:
        await butler.aclose()
        raise
    return butler


async def _unset_refresh() -> None:
    raise RuntimeError("the butler's tool tables are not built yet")
