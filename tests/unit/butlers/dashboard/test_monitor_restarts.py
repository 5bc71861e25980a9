"""A butler that restarts between two probes (killed and back before the monitor saw it
down) is noticed at the next probe: its `/ready` names another run, so its `status` is
read again at once and the change published, not half a minute later."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx2 as httpx

from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.monitor import ButlerMonitor

BUTLER = ButlerInfo(name="health", url="http://butler.test/mcp", schema="health")


class Clients:
    def __init__(self) -> None:
        self.restarts = 0
        self.calls = 0

    async def call(self, butler: ButlerInfo, tool: str, args: dict[str, Any], **_: Any) -> Any:
        self.calls += 1
        starts = {"restarts": self.restarts, "last_start_after_crash": self.restarts > 0}
        return SimpleNamespace(data={"modules": [], "version": "1", "starts": starts})


class Broker:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def publish(self, event_type: str, data: dict[str, Any]) -> None:
        self.events.append((event_type, data))


async def test_a_quick_restart_is_read_and_published_at_the_next_probe() -> None:
    run = {"instance": "first"}

    def ready(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "ready", "instance": run["instance"]})

    clients, broker = Clients(), Broker()
    monitor = ButlerMonitor(lambda: {"health": BUTLER}, clients, broker)  # type: ignore[arg-type]
    monitor._http = httpx.AsyncClient(transport=httpx.MockTransport(ready))
    await monitor.probe_all()
    assert monitor.get("health").starts == {"restarts": 0, "last_start_after_crash": False}
    await monitor.probe_all()
    assert clients.calls == 1  # ok and fresh: `status` is not asked again
    published = len(broker.events)

    run["instance"], clients.restarts = "second", 1  # killed and back between two probes
    await monitor.probe_all()
    health = monitor.get("health")
    assert (health.status, health.starts) == (
        "ok",
        {"restarts": 1, "last_start_after_crash": True},
    )
    assert [e for e, _ in broker.events[published:]] == ["butler_status"]
    assert "instance" not in (health.reason or "")
    await monitor._http.aclose()
