"""Fixtures of the dashboard API tests: an HTTP client on the ecosystem's dashboard,
an SSE reader, seeded session rows, and extra in-process dashboards."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx2 as httpx
import pytest

from butlers.dashboard.directory import ButlerInfo
from butlers.db.embedded import free_port
from butlers.roster import load_roster
from butlers.settings import DashboardSettings
from tests.support.dashboard import StaticDirectory, served_dashboard

from ..conftest import ROOT
from ..harness.ecosystem import EcosystemHandle

CSRF = {"X-Butlers-CSRF": "1"}


@pytest.fixture
async def dashboard(butler_ecosystem: EcosystemHandle) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the ecosystem's own dashboard (mutations carry the CSRF header)."""
    if butler_ecosystem.dashboard_url is None:
        pytest.skip(f"the {butler_ecosystem.backend} backend runs no dashboard")
    token = butler_ecosystem.dashboard_token
    headers = CSRF | ({"Authorization": f"Bearer {token}"} if token else {})
    async with httpx.AsyncClient(
        base_url=butler_ecosystem.dashboard_url, headers=headers, timeout=60
    ) as client:
        yield client


@dataclass
class SseEvent:
    type: str
    data: Any
    id: str | None
    received: float  # time.monotonic() on arrival
    wall: float = field(default_factory=time.time)  # time.time() on arrival


@dataclass
class SseReader:
    """Reads an event stream in the background; tests wait for events with deadlines."""

    response: httpx.Response
    events: list[SseEvent] = field(default_factory=list)
    comments: list[float] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False

    async def run(self) -> None:
        kind, data, event_id = "message", [], None
        try:
            async for line in self.response.aiter_lines():
                if line == "":
                    if data:
                        self.events.append(
                            SseEvent(kind, json.loads("\n".join(data)), event_id, time.monotonic())
                        )
                        self.arrived.set()
                    kind, data, event_id = "message", [], None
                elif line.startswith(":"):
                    self.comments.append(time.monotonic())
                    self.arrived.set()
                elif line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line.startswith("id:"):
                    event_id = line[3:].strip()
        except (httpx.HTTPError, asyncio.CancelledError):
            pass
        finally:
            self.closed = True
            self.arrived.set()

    async def wait_for(
        self, predicate: Callable[[SseEvent], bool], timeout: float = 10.0, after: int = 0
    ) -> SseEvent:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[after:]:
                if predicate(event):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                seen = [(e.type, e.data) for e in self.events[after:]][-10:]
                raise AssertionError(f"no matching event within {timeout} s; last seen {seen}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), remaining)


@contextlib.asynccontextmanager
async def sse(
    client: httpx.AsyncClient, last_event_id: str | None = None
) -> AsyncIterator[SseReader]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    async with client.stream("GET", "/api/events", headers=headers, timeout=None) as response:
        assert response.status_code == 200, await response.aread()
        reader = SseReader(response)
        task = asyncio.create_task(reader.run())
        try:
            await reader.wait_for(lambda e: e.type == "connected", timeout=10)
            yield reader
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def seed_sessions(
    handle: EcosystemHandle, butler: str, rows: list[dict[str, Any]]
) -> list[str]:
    """Insert session rows as the butler's own role (the dashboard only reads them)."""
    pool = await handle.pool(butler)
    ids = []
    for row in rows:
        session_id = row.get("session_id") or uuid.uuid4()
        ids.append(str(session_id))
        await pool.execute(
            "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, model, status, "
            "created_at, completed_at, duration_ms, tool_calls, input_tokens, output_tokens, "
            "cost_usd, trace_id, error, cached_tokens, cache_write_tokens) VALUES ($1, $2, $3, "
            "$4, $5, $6, $7, $8, $9, $10::text::jsonb, $11, $12, $13, $14, $15, $16, $17)",
            session_id,
            butler,
            row.get("trigger_source", "seed"),
            row.get("prompt", "seeded"),
            row.get("model", "scripted"),
            row.get("status", "completed"),
            row["created_at"],
            row.get("completed_at", row["created_at"]),
            row.get("duration_ms", 10),
            json.dumps(row.get("tool_calls", [])),
            row.get("input_tokens"),
            row.get("output_tokens"),
            row.get("cost_usd"),
            row.get("trace_id"),
            row.get("error"),
            row.get("cached_tokens"),
            row.get("cache_write_tokens"),
        )
    return ids


def directory_of(handle: EcosystemHandle) -> StaticDirectory:
    """The ecosystem's butlers as a fixed directory (for dashboards a test starts itself)."""
    resources = {r.name: r for r in load_roster(ROOT / "roster")}
    return StaticDirectory(
        [
            ButlerInfo(
                name=e.name,
                url=e.url,
                schema=e.schema,
                modules=tuple(resources[e.name].spec.modules),
                resource=resources[e.name],
            )
            for e in handle.endpoints.values()
        ],
        mcp_token=handle.token,  # the user's token: writes go through the butlers' MCP
    )


@contextlib.asynccontextmanager
async def extra_dashboard(
    handle: EcosystemHandle, directory: Any = None, **overrides: Any
) -> AsyncIterator[tuple[str, Any]]:
    """Another dashboard over the same ecosystem, served from this process.

    Yields its base URL and its app (whose `state.dashboard` a test may reach into).
    """
    if handle.dashboard_dsn is None:
        pytest.skip(f"the {handle.backend} backend has no dashboard role")
    settings = DashboardSettings(
        port=free_port(),
        dsn=handle.dashboard_dsn,
        schema=handle.dashboard_schema,
        probe_interval=0.5,
        keepalive_seconds=1.0,
        poll_interval=0.2,
        **overrides,
    )
    async with served_dashboard(settings, directory or directory_of(handle)) as served:
        yield served


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)
