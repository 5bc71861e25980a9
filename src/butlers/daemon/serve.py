"""Running one butler: spec → pool → FastMCP server → HTTP until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

import asyncpg
import uvicorn

from butlers import migrations
from butlers.core.context import ButlerContext
from butlers.core.services import build_session_services
from butlers.daemon.http import build_http_app
from butlers.daemon.registration import Registrar
from butlers.daemon.server import build_server, finalize_server, register_session_service_tools
from butlers.db.pool import create_pool
from butlers.errors import ButlersError, PortInUseError
from butlers.logs import configure_logging
from butlers.modules.loader import module_chains, start_modules
from butlers.roster import load_butler_file
from butlers.settings import ButlerSettings
from butlers.spec import schema_name
from butlers.telemetry import configure_tracing

log = logging.getLogger(__name__)
READY_TIMEOUT = 2.0


def bind_socket(host: str, port: int, butler: str) -> socket.socket:
    """Bind now, so a taken port is a clear error before anything else starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it every MCP response waits ~40 ms
    # on delayed ACKs (Nagle), since uvicorn does not set it on pre-bound sockets.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise PortInUseError(
            f"butler {butler!r}: port {port} on {host} is already in use ({exc.strerror}); "
            f"stop whatever listens there or change spec.port"
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def make_ready_check(pool: asyncpg.Pool, chains: list[migrations.Chain]):  # type: ignore[no-untyped-def]
    expected = {chain.name: migrations.heads(chain) for chain in chains}

    async def ready_check() -> tuple[bool, dict[str, object]]:
        applied: dict[str, set[str]] = {}
        try:
            async with asyncio.timeout(READY_TIMEOUT), pool.acquire() as conn:
                for chain in chains:
                    try:
                        rows = await conn.fetch(f"SELECT version_num FROM {chain.version_table}")
                    except asyncpg.UndefinedTableError:
                        rows = []
                    applied[chain.name] = {row["version_num"] for row in rows}
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            return False, {"database": f"unreachable: {exc.__class__.__name__}: {exc}"}
        behind = {
            name: {"applied": sorted(applied[name]), "head": sorted(heads)}
            for name, heads in expected.items()
            if applied[name] != heads
        }
        if behind:
            return False, {"database": "ok", "migrations": behind}
        return True, {"database": "ok", "migrations": "at head"}

    return ready_check


def run(spec_path: Path | None = None, *, port: int | None = None, host: str | None = None) -> int:
    """`butlers serve`: one butler in the foreground until SIGTERM/SIGINT; the exit code.

    The entry point of a pod's container and of every child of `butlers up`.
    """
    try:
        settings = ButlerSettings.from_env(spec_path=spec_path, port=port, host=host)
        configure_logging(load_butler_file(settings.spec_path).name, settings.log_level)
        asyncio.run(serve(settings))
    except ButlersError as exc:
        print(f"butlers serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def serve(settings: ButlerSettings) -> None:
    resource = load_butler_file(settings.spec_path)
    name = resource.name
    schema = settings.schema or schema_name(name)
    port = settings.port or resource.spec.port
    sock = bind_socket(settings.host, port, name)
    pool = await create_pool(settings.dsn, schema, application_name=f"butler:{name}")
    try:
        butler = ButlerContext(
            resource=resource,
            schema=schema,
            pool=pool,
            environ=settings.environ,
            approval_timeout_seconds=settings.approval_timeout_seconds,
        )
        mcp = build_server(butler)
        modules = await start_modules(mcp, butler)
        local_host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
        own_url = f"http://{local_host}:{port}/mcp"
        services = build_session_services(
            mcp, butler, settings, mcp_url=own_url, hidden_tools=modules.session_hidden_tools()
        )
        register_session_service_tools(mcp, services)
        await services.start(butler)
        modules.services["spawner"] = services.spawner
        configure_tracing(
            name, otlp_endpoint=settings.otlp_endpoint, span_file=_span_file(settings, name)
        )
        await finalize_server(mcp, butler, secrets=services.redactor.secrets)
        registrar = (
            Registrar(
                butler,
                switchboard_url=settings.switchboard_url,
                advertise_url=settings.advertise_url or own_url,
                interval=settings.heartbeat_interval,
            )
            if settings.switchboard_url
            else None
        )
        chains = [migrations.CORE, *module_chains(resource.spec.modules)]
        app = build_http_app(mcp, name, make_ready_check(pool, chains))
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=10,
        )
        server = _GracefulServer(config)
        watch = (
            asyncio.create_task(_exit_with_parent(settings.parent_pid, server))
            if settings.parent_pid
            else None
        )
        log.info(
            "butler %s serving MCP on http://%s:%d/mcp (schema %s)",
            name,
            settings.host,
            port,
            schema,
        )
        if registrar:
            registrar.start()
        try:
            await server.serve(sockets=[sock])
        finally:
            if watch:
                watch.cancel()
            if registrar:
                await registrar.aclose()
            await services.aclose()
            await modules.stop()
    finally:
        await pool.close()
        sock.close()
        log.info("butler %s stopped", name)


class _GracefulServer(uvicorn.Server):
    """SIGTERM/SIGINT stop serving gracefully and return, so the butler can then stop its
    scheduler, sessions, modules and pool (uvicorn would otherwise re-raise the signal
    once it stopped serving, killing the process before any of that ran)."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def _span_file(settings: ButlerSettings, name: str) -> Path | None:
    return settings.span_dir / f"{name}.jsonl" if settings.span_dir else None


async def _exit_with_parent(parent_pid: int, server: uvicorn.Server) -> None:
    """Shut down gracefully when the supervising process is gone (no orphans)."""
    while os.getppid() == parent_pid:  # noqa: ASYNC110 (no event exists for a parent's death)
        await asyncio.sleep(1.0)
    log.warning("supervisor (pid %d) is gone; shutting down", parent_pid)
    server.should_exit = True
