"""Running the dashboard: `butlers dashboard`, and the dashboard child of `butlers up`."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
from types import FrameType

import uvicorn

from butlers.dashboard.app import create_app
from butlers.errors import ButlersError, PortInUseError
from butlers.listen import listen_socket
from butlers.logs import configure_logging
from butlers.settings import DashboardSettings
from butlers.waiting import process_exit

log = logging.getLogger(__name__)
NO_LOGIN_WARNING = (
    "the dashboard runs WITHOUT A LOGIN (--no-login): every local account on this "
    "machine can read your butlers' data and act as you through it"
)


def bind(host: str, port: int) -> socket.socket:
    try:
        return listen_socket(host, port)  # `::`: every address of both families
    except OSError as exc:
        raise PortInUseError(
            f"dashboard: port {port} on {host} is already in use ({exc.strerror}); stop "
            "whatever listens there or pass another port (--dashboard-port / --port)"
        ) from None


class _GracefulServer(uvicorn.Server):
    """SIGTERM/SIGINT end serving and return, so the lifespan closes everything."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


async def serve(settings: DashboardSettings, parent_pid: int | None = None) -> None:
    sock = bind(settings.host, settings.port)
    config = uvicorn.Config(
        create_app(settings),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        proxy_headers=False,
    )
    server = _GracefulServer(config)
    watch = asyncio.create_task(_exit_with_parent(parent_pid, server)) if parent_pid else None
    log.info("dashboard on http://%s:%d/", settings.host, settings.port)
    if not settings.login:
        log.warning(NO_LOGIN_WARNING)
    try:
        await server.serve(sockets=[sock])
    finally:
        if watch:
            watch.cancel()
        sock.close()
        log.info("dashboard stopped")


async def _exit_with_parent(parent_pid: int, server: uvicorn.Server) -> None:
    await process_exit(parent_pid)
    log.warning("supervisor (pid %d) is gone; shutting down", parent_pid)
    server.should_exit = True


def run(settings: DashboardSettings | None = None) -> int:
    """The dashboard in the foreground until SIGTERM/SIGINT; the exit code."""
    try:
        settings = settings or DashboardSettings.from_env()
        configure_logging("dashboard", settings.log_level)
        asyncio.run(serve(settings, settings.parent_pid))
    except ButlersError as exc:
        print(f"butlers dashboard: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
