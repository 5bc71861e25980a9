"""A dashboard served from the test's own process (uvicorn on a free port)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import uvicorn

from butlers.dashboard.app import create_app
from butlers.dashboard.directory import ButlerInfo, Directory
from butlers.settings import DashboardSettings


@contextlib.asynccontextmanager
async def served_dashboard(
    settings: DashboardSettings, directory: Directory
) -> AsyncIterator[tuple[str, Any]]:
    """Yields the dashboard's base URL and its app (`app.state.dashboard` for tests)."""
    app = create_app(settings, directory=directory)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=settings.port, log_config=None, lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    url = f"http://127.0.0.1:{settings.port}/"
    deadline = time.monotonic() + 30
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            if task.done():
                raise RuntimeError(f"the dashboard did not start: {task.exception()!r}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{url}api/health")).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the dashboard did not start within 30 s")
            await asyncio.sleep(0.05)
    try:
        yield url, app
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 15)


class StaticDirectory:
    """A fixed set of butlers (tests, benchmarks, embedding)."""

    def __init__(self, butlers: list[ButlerInfo], mcp_token: str | None = None) -> None:
        self._butlers = {b.name: b for b in butlers}
        self._token = mcp_token

    def butlers(self) -> dict[str, ButlerInfo]:
        return dict(self._butlers)

    async def refresh(self) -> bool:
        return False

    @property
    def mcp_token(self) -> str | None:
        return self._token

    def set(self, butlers: list[ButlerInfo]) -> None:
        self._butlers = {b.name: b for b in butlers}

    def describe(self) -> str:
        return f"{len(self._butlers)} configured butlers"
