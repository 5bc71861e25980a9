"""Registering this butler with the switchboard, and keeping its heartbeat.

A background task owned by the daemon: it registers (name, description, URL,
routing hints, modules) with the butler's own token as soon as the switchboard
answers, retrying with backoff, then sends a heartbeat every interval and registers again whenever
the switchboard no longer knows it (e.g. after its database was reset).

Every failure is retried, but only an unreachable switchboard is routine (INFO);
a refusal by the switchboard is an ERROR naming its reason, and anything else is
a bug, logged with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from butlers.core.context import ButlerContext
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed

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
        clients: McpClient | None = None,
    ) -> None:
        self._butler = butler
        self._switchboard = switchboard_url
        self._url = advertise_url
        self._interval = interval
        token = butler.token
        # The butler's own token: the switchboard lets it register only its own name.
        self._clients = clients or McpClient(
            {"Authorization": f"Bearer {token}"} if token else None,
            timeout=10.0,
            client_name=f"butler {butler.name}",
        )
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
            idempotent=True,
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
                    self._switchboard,
                    "butler_heartbeat",
                    {"name": self._butler.name},
                    idempotent=True,
                )
                if not (result.data or {}).get("known", False):
                    self.registered.clear()
            except asyncio.CancelledError:
                raise
            except (EndpointUnavailable, OSError, TimeoutError) as exc:
                log.info("switchboard not reachable yet (%s); retrying in %.1f s", exc, backoff)
            except (ToolFailed, McpError) as exc:
                log.error(
                    "the switchboard at %s refused %s: %s; retrying in %.1f s",
                    self._switchboard,
                    self._butler.name,
                    exc,
                    backoff,
                )
            except Exception:
                log.exception(
                    "registering with the switchboard at %s failed; retrying in %.1f s",
                    self._switchboard,
                    backoff,
                )
            else:
                continue
            self.registered.clear()
            await asyncio.sleep(backoff)
            backoff = min(MAX_BACKOFF, backoff * 2)
