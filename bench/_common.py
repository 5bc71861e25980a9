"""Shared helpers for the benchmarks: percentiles and a throwaway ecosystem."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from butlers.db.embedded import EmbeddedPostgres
from butlers.ecosystem.supervisor import Ecosystem
from butlers.roster import load_roster
from butlers.settings import EcosystemSettings
from butlers.testing.script_server import ScriptServer

ROOT = Path(__file__).resolve().parents[1]


def user_client(eco: Ecosystem, name: str, timeout: float = 60) -> Client:  # type: ignore[type-arg]
    """An MCP client of butler `name` with the ecosystem's user token."""
    assert eco.tokens is not None
    headers = {"Authorization": f"Bearer {eco.tokens.user_token}"}
    return Client(StreamableHttpTransport(eco.butlers[name].url, headers=headers), timeout=timeout)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {"p50": statistics.median(ms), "p99": percentile(ms, 99), "n": len(ms)}


async def timed(fn: Callable[[], Awaitable[object]], n: int, warmup: int = 50) -> list[float]:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return samples


@asynccontextmanager
async def ecosystem(
    names: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    *,
    dashboard: bool = False,
    log_level: str = "WARNING",
) -> AsyncIterator[Ecosystem]:
    """Butlers from the roster (all, or `names`) on free ports and a throwaway server
    (with the dashboard when asked), logging to files at `log_level`."""
    with tempfile.TemporaryDirectory(prefix="butlers-bench-") as tmp:
        data_dir = Path(tmp)
        server = EmbeddedPostgres(data_dir / "pg", fsync=False)
        server.start()
        try:
            resources = [
                r for r in load_roster(ROOT / "roster") if names is None or r.name in names
            ]
            settings = EcosystemSettings(
                data_dir=data_dir / "eco",
                roster_dir=ROOT / "roster",
                database_url=server.admin_dsn(),
                free_ports=True,
                log_level=log_level,
                dashboard=dashboard,
            )
            eco = Ecosystem(settings=settings, resources=resources, extra_env=extra_env or {})
            await eco.start()
            try:
                yield eco
            finally:
                await eco.stop()
        finally:
            server.stop()


def run_on_a_database(name: str, main: Callable[[str], Awaitable[None]]) -> int:
    """`main(admin_dsn)` on BUTLERS_DATABASE_URL, else on a throwaway embedded server.

    A benchmark reports and never fails the build: an error is printed, the exit code is 0.
    """
    import asyncio
    import os
    import shutil
    import sys

    root = server = None
    admin_dsn = os.environ.get("BUTLERS_DATABASE_URL")
    try:
        if not admin_dsn:
            root = Path(tempfile.mkdtemp(prefix="butlers-bench-pg-"))
            root.chmod(0o755)
            server = EmbeddedPostgres(root / "postgres", fsync=False)
            server.start()
            admin_dsn = server.admin_dsn()
        asyncio.run(main(admin_dsn))
    except Exception as exc:
        print(f"{name}: could not complete: {exc.__class__.__name__}: {exc}", file=sys.__stdout__)
    finally:
        if server is not None:
            server.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


PIPELINE_BUTLERS = ["switchboard", "general", "health", "relationship"]


@asynccontextmanager
async def scripted_ecosystem() -> AsyncIterator[tuple[ScriptServer, Ecosystem]]:
    """The switchboard and three target butlers as processes, answered by a scripted model
    served from this process; yields the script server and the ecosystem."""
    scripts = ScriptServer().start()
    env = {
        "BUTLERS_RUNTIME_ADAPTER": "scripted",
        "BUTLERS_SCRIPT_URL": scripts.url,
        "BUTLERS_TICK_INTERVAL": "3600",
    }
    try:
        async with ecosystem(PIPELINE_BUTLERS, extra_env=env) as eco:
            yield scripts, eco
    finally:
        scripts.stop()


@asynccontextmanager
async def scripted_pipeline(
    timeout: float = 60,
) -> AsyncIterator[tuple[ScriptServer, Client]]:  # type: ignore[type-arg]
    """`scripted_ecosystem`, yielding the script server and a user client of the switchboard."""
    async with (
        scripted_ecosystem() as (scripts, eco),
        user_client(eco, "switchboard", timeout=timeout) as client,
    ):
        yield scripts, client
