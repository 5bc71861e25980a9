"""Live status of every butler, probed in the background.

Every `interval` seconds each butler's `/ready` is asked (it stays open when
`/mcp` needs a token) and, when it answers, its `status` tool tells which modules
are active. A butler is `ok` (ready, every module active), `degraded` (answers,
but not ready or a module failed, for want of credentials too; the reason says which)
or `down` (no answer).
Every change is published as a `butler_status` event, so pages update live.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx2 as httpx

from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.errors import DashboardError
from butlers.dashboard.events import EventBroker
from butlers.dashboard.mcp import ButlerClients

log = logging.getLogger(__name__)
PROBE_TIMEOUT = 2.0
STATUS_REFRESH = 30.0  # seconds between `status` calls while a butler stays ok


@dataclass
class ButlerHealth:
    status: str = "unknown"  # ok | degraded | down | unknown
    reason: str | None = None
    checked_at: datetime | None = None
    modules: list[dict[str, Any]] = field(default_factory=list)
    version: str | None = None
    uptime_seconds: float | None = None
    starts: dict[str, Any] | None = None  # the butler's restarts, as `status` reports them
    ready: dict[str, Any] | None = None
    status_at: float = 0.0  # monotonic time of the last `status` call

    def public(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "checked_at": self.checked_at}


class ButlerMonitor:
    def __init__(
        self,
        butlers: Any,  # () -> dict[str, ButlerInfo]
        clients: ButlerClients,
        broker: EventBroker,
        *,
        interval: float = 2.0,
    ) -> None:
        self._butlers = butlers
        self._clients = clients
        self._broker = broker
        self.interval = interval
        self.health: dict[str, ButlerHealth] = {}
        self._http: httpx.AsyncClient | None = None
        self._wake = asyncio.Event()
        self._round_done = asyncio.Event()
        self.rounds = 0

    def get(self, name: str) -> ButlerHealth:
        return self.health.get(name) or ButlerHealth()

    def unprobed(self) -> list[str]:
        """The butlers that have no verdict yet (new, or the first round still runs)."""
        return sorted(set(self._butlers()) - set(self.health))

    async def settled(self, timeout: float = PROBE_TIMEOUT + 1.0) -> None:
        """Until every butler has been probed once (at most `timeout`): a page asked for
        right after start-up shows each butler's status, never `unknown`."""
        deadline = time.monotonic() + timeout
        while self.unprobed() and self._http is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._round_done.clear()
            self.poke()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._round_done.wait(), remaining)

    def module_changed(self, name: str, state: dict[str, Any]) -> None:
        """A module of butler `name` was switched: its state as the butler answered
        (shown until the next `status` call)."""
        health = self.health.get(name)
        if health is not None:
            health.modules = [
                state if m.get("name") == state.get("name") else m for m in health.modules
            ]

    def poke(self) -> None:
        """Probe now (a write just failed, a butler was added)."""
        self._wake.set()

    async def run(self) -> None:
        self._http = httpx.AsyncClient(timeout=PROBE_TIMEOUT)
        try:
            while True:
                await self.probe_all()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
        finally:
            await self._http.aclose()

    async def probe_all(self) -> None:
        butlers: dict[str, ButlerInfo] = self._butlers()
        for gone in set(self.health) - set(butlers):
            del self.health[gone]
        await asyncio.gather(*(self._probe(b) for b in butlers.values()))
        self.rounds += 1
        self._round_done.set()

    async def _probe(self, butler: ButlerInfo) -> None:
        previous = self.health.get(butler.name)
        health = ButlerHealth(
            modules=previous.modules if previous else [],
            version=previous.version if previous else None,
            uptime_seconds=previous.uptime_seconds if previous else None,
            starts=previous.starts if previous else None,
            status_at=previous.status_at if previous else 0.0,
        )
        health.checked_at = datetime.now(UTC)
        try:
            assert self._http is not None
            response = await self._http.get(f"{butler.base_url}/ready")
        except (httpx.HTTPError, OSError) as exc:
            health.status = "down"
            health.reason = f"no answer at {butler.base_url}: {exc.__class__.__name__}"
            health.status_at = 0.0
        else:
            try:
                health.ready = response.json()
            except ValueError:
                health.ready = None
            stale = time.monotonic() - health.status_at > STATUS_REFRESH
            restarted = _instance(previous) not in (None, _instance(health))
            if previous is None or previous.status != "ok" or stale or restarted:
                await self._refresh_status(butler, health)
            health.status, health.reason = _verdict(response.status_code, health)
        self.health[butler.name] = health
        starts_changed = previous is not None and previous.starts != health.starts
        if (
            previous is None
            or starts_changed
            or (previous.status, previous.reason) != (health.status, health.reason)
        ):
            if previous is not None or health.status != "ok":
                log.info("butler %s is %s: %s", butler.name, health.status, health.reason)
            self._broker.publish(
                "butler_status",
                {
                    "butler": butler.name,
                    "status": health.status,
                    "reason": health.reason,
                    "previous": previous.status if previous else None,
                },
            )

    async def _refresh_status(self, butler: ButlerInfo, health: ButlerHealth) -> None:
        try:
            outcome = await self._clients.call(butler, "status", {}, timeout=PROBE_TIMEOUT * 2)
        except DashboardError as exc:
            log.debug("status of %s: %s", butler.name, exc.message)
            return
        data = outcome.data if isinstance(outcome.data, dict) else {}
        health.modules = list(data.get("modules") or [])
        health.version = data.get("version")
        health.uptime_seconds = data.get("uptime_seconds")
        starts = data.get("starts")
        health.starts = starts if isinstance(starts, dict) else None
        health.status_at = time.monotonic()


def _instance(health: ButlerHealth | None) -> str | None:
    """The run of the butler that answered `/ready` last (None before an answer)."""
    ready = health.ready if health else None
    value = ready.get("instance") if isinstance(ready, dict) else None
    return value if isinstance(value, str) else None


def _verdict(code: int, health: ButlerHealth) -> tuple[str, str | None]:
    if code != 200:
        detail = health.ready or {}
        shown = detail.items()
        parts = [f"{k}: {v}" for k, v in shown if k not in ("status", "butler", "instance")]
        return "degraded", "not ready (" + ("; ".join(parts) or f"HTTP {code}") + ")"
    # Any module that did not start leaves the butler short of what its spec promises,
    # a missing credential included: degraded, the reason naming what to fix. A module
    # the owner switched off is not a failure.
    failed = [m for m in health.modules if m.get("status") not in ("active", "disabled", None)]
    if failed:
        return "degraded", "; ".join(
            f"module {m['name']} {m['status']} ({m.get('phase')}): {m.get('error')}" for m in failed
        )
    return "ok", None
