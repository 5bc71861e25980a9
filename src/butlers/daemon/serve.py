"""Running one butler: spec → pool → FastMCP server → HTTP until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
from collections.abc import Coroutine
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import uvicorn

from butlers import migrations
from butlers.auth.http import HostPolicy
from butlers.daemon.admission import raise_file_limit
from butlers.daemon.butler import Butler, build_butler
from butlers.daemon.http import ReadyCheck, build_http_app
from butlers.daemon.http_limits import HeaderTimeoutProtocol
from butlers.daemon.registration import Registrar
from butlers.db.pool import create_pool
from butlers.errors import ButlersError, PortInUseError
from butlers.listen import listen_socket
from butlers.logs import configure_logging
from butlers.modules.loader import butler_chains
from butlers.roster import load_butler_file
from butlers.settings import ButlerSettings
from butlers.spec import schema_name
from butlers.telemetry import configure_tracing
from butlers.waiting import process_exit

log = logging.getLogger(__name__)
READY_TIMEOUT = 2.0

try:  # the faster event loop where it is installed (a dependency off Windows)
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]
LOOP = "uvloop" if uvloop is not None else "asyncio"


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    if uvloop is not None:
        uvloop.run(main)
    else:  # pragma: no cover
        asyncio.run(main)


def bind_socket(host: str, port: int, butler: str) -> socket.socket:
    """Bind now, so a taken port is a clear error before anything else starts."""
    # TCP_NODELAY included (uvicorn does not set it on pre-bound sockets); `::` is every
    # address of both families.
    try:
        return listen_socket(host, port)
    except OSError as exc:
        raise PortInUseError(
            f"butler {butler!r}: port {port} on {host} is already in use ({exc.strerror}); "
            f"stop whatever listens there or change spec.port"
        ) from None


def make_ready_check(pool: asyncpg.Pool, chains: list[migrations.Chain]) -> ReadyCheck:
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
        configure_logging(
            load_butler_file(settings.spec_path).name,
            settings.log_level,
            log_file=settings.log_file,
            max_bytes=settings.log_max_bytes,
        )
        _run_loop(serve(settings))
    except ButlersError as exc:
        print(f"butlers serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def serve(settings: ButlerSettings) -> None:
    settings.auth.require_users()
    resource = load_butler_file(settings.spec_path)
    name = resource.name
    schema = settings.schema or schema_name(name)
    port = settings.port or resource.spec.port
    raise_file_limit()  # room for the connections `daemon.admission` lets wait
    sock = bind_socket(settings.host, port, name)
    pool = await create_pool(
        settings.dsn,
        schema,
        min_size=settings.pool_sizes[0],
        max_size=settings.pool_sizes[1],
        application_name=f"butler:{name}",
    )
    try:
        configure_tracing(
            name, otlp_endpoint=settings.otlp_endpoint, span_file=_span_file(settings, name)
        )
        local_host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
        own_url = f"http://{local_host}:{port}/mcp"
        butler = await build_butler(resource, pool, settings, schema=schema, mcp_url=own_url)
        try:
            await _serve_http(butler, settings, sock, own_url, port)
        finally:
            await butler.aclose()
    finally:
        await pool.close()
        sock.close()
        log.info("butler %s stopped", name)


async def _serve_http(
    butler: Butler, settings: ButlerSettings, sock: socket.socket, own_url: str, port: int
) -> None:
    """Start the butler's background work and serve HTTP on `sock` until asked to stop."""
    await butler.start()
    advertise_url = settings.advertise_url or own_url
    registrar = (
        Registrar(
            butler.context,
            switchboard_url=settings.switchboard_url,
            advertise_url=advertise_url,
            interval=settings.heartbeat_interval,
        )
        if settings.switchboard_url
        else None
    )
    chains = butler_chains(butler.context.resource.spec.modules)
    auth = settings.auth
    # Host names this butler answers to: configured ones, its advertised URL's, its bind.
    hosts = HostPolicy(
        names=[*auth.allowed_hosts, _host_of(advertise_url), settings.host],
        origins=auth.allowed_origins,
    )
    app = build_http_app(
        butler.server,
        butler.name,
        make_ready_check(butler.context.pool, chains),
        book=butler.context.tokens,
        hosts=hosts,
        direct_calls=settings.mcp_fast_path,
        webhooks=butler.webhooks,
    )
    config = http_config(app)
    server = _GracefulServer(config)
    watch = (
        asyncio.create_task(_exit_with_parent(settings.parent_pid, server))
        if settings.parent_pid
        else None
    )
    log.info(
        "butler %s serving MCP on http://%s:%d/mcp (schema %s)",
        butler.name,
        settings.host,
        port,
        butler.context.schema,
    )
    if registrar:
        registrar.start()
    # What start-up built lives as long as the process: out of the collector's way, so
    # collections during requests scan only what requests allocate.
    gc.collect()
    gc.freeze()
    try:
        await server.serve(sockets=[sock])
    finally:
        if watch:
            watch.cancel()
        if registrar:
            await registrar.aclose()


def http_config(app: Any, **options: Any) -> uvicorn.Config:
    """How a butler serves its ASGI app (`options`: where, for tests: host, port)."""
    return uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # A deadline for request headers (slowloris), and connection caps that keep
        # callers with a valid token apart from strangers (`daemon.admission`).
        http=HeaderTimeoutProtocol,
        ws="none",  # no WebSocket endpoint: the `websockets` protocol stays unimported
        # No proxy sits in front of a butler that it should believe: X-Forwarded-* from a
        # local process must not rewrite who the client is (and the layer costs a call).
        proxy_headers=False,
        **options,
    )


class _GracefulServer(uvicorn.Server):
    """SIGTERM/SIGINT stop serving gracefully and return, so the butler can then stop its
    scheduler, sessions, modules and pool (uvicorn would otherwise re-raise the signal
    once it stopped serving, killing the process before any of that ran)."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def _host_of(url: str) -> str:
    return urlsplit(url).hostname or ""


def _span_file(settings: ButlerSettings, name: str) -> Path | None:
    return settings.span_dir / f"{name}.jsonl" if settings.span_dir else None


async def _exit_with_parent(parent_pid: int, server: uvicorn.Server) -> None:
    """Shut down gracefully when the supervising process is gone (no orphans)."""
    await process_exit(parent_pid)
    log.warning("supervisor (pid %d) is gone; shutting down", parent_pid)
    server.should_exit = True
