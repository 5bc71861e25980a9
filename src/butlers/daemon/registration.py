"""Registering this butler with the switchboard, and keeping its heartbeat.

A background task owned by the daemon: it registers (name, description, URL,
routing hints, modules) as soon as the switchboard answers, retrying with
backoff, then sends a heartbeat every interval and registers again whenever
the switchboard no longer knows it (e.g. after its database was reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from butlers.core.context import ButlerContext
from butlers.mcp_clients import ClientCache

log = logging.getLogger(__name__)
MAX_BACKOFF = 10.0


class Registrar:
    def __init__(
        self,
        butler: ButlerContext,
        *,
        switchboard_url: str,
        advertise_url: str,
        interval: float,
    ) -> None:
        self._butler = butler
        self._switchboard = switchboard_url
        self._url = advertise_url
        self._interval = interval
        self._clients = ClientCache(timeout=10.0)
        self._task: asyncio.Task[None] | None = None
        self.registered = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="switchboard registration")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._clients.close()

    async def register(self) -> None:
        spec = self._butler.resource.spec
        await self._clients.call_tool(
            self._switchboard,
            "butler_register",
            {
                "name": self._butler.name,
                "description": spec.description,
                "url": self._url,
                "hints": list(spec.routing.hints),
                "modules": [m.name for m in self._butler.modules if m.status == "active"],
            },
        )
        self.registered.set()
        log.info("registered with the switchboard at %s as %s", self._switchboard, self._url)

    async def _run(self) -> None:
        backoff = 0.2
        while True:
            try:
                if not self.registered.is_set():
                    await self.register()
                    backoff = 0.2
                await asyncio.sleep(self._interval)
                result = await self._clients.call_tool(
                    self._switchboard, "butler_heartbeat", {"name": self._butler.name}
                )
                if not (result.data or {}).get("known", False):
                    self.registered.clear()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.registered.clear()
                log.info("switchboard not reachable yet (%s); retrying in %.1f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)
