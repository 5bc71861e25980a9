"""Spawner overhead: trigger-to-completed time of a scripted session with one tool call,
against a bare `state_set` call over MCP measured in the same run.

Runs in-process on an embedded PostgreSQL (or BUTLERS_DATABASE_URL): the butler's own
FastMCP server, its spawner with the scripted runtime, and the HTTP script server.
The session's cost is: two session-log writes, two model round trips to the script
server, opening the session's MCP client, listing tools and one `state_set`.
Prints p50/p99 and ratios; never fails on timing.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastmcp import Client

from butlers import migrations
from butlers.core.context import ButlerContext
from butlers.core.services import build_session_services
from butlers.daemon.server import build_server, register_session_service_tools
from butlers.db.embedded import EmbeddedPostgres
from butlers.db.pool import create_pool
from butlers.db.provision import deprovision, provision
from butlers.settings import ButlerSettings, RuntimeOverrides
from butlers.spec import ButlerResource
from butlers.testing.script_server import ScriptServer, call, step

ITERATIONS = int(os.environ.get("BENCH_ITERATIONS", "200"))
WARMUP = 20


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _measure(admin_dsn: str) -> None:
    schema = f"bench_spawner_{os.getpid()}"
    credentials = await provision(admin_dsn, schema)
    dsn = credentials.dsn(admin_dsn)
    await migrations.upgrade(dsn, schema, [migrations.CORE])
    pool = await create_pool(dsn, schema)
    scripts = ScriptServer().start()
    resource = ButlerResource.model_validate(
        {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "metadata": {"name": "bench"},
            "spec": {"description": "benchmark butler", "port": 41999},
        }
    )
    settings = ButlerSettings(
        spec_path=Path("bench.yaml"),
        dsn=dsn,
        schema=schema,
        host="127.0.0.1",
        port=41999,
        runtime=RuntimeOverrides(adapter="scripted", script_url=scripts.url),
        tick_interval=3600,
    )
    butler = ButlerContext(resource=resource, schema=schema, pool=pool)
    mcp = build_server(butler)
    services = build_session_services(mcp, butler, settings, mcp_url="http://127.0.0.1:1/mcp")
    register_session_service_tools(mcp, services)
    try:
        async with Client(mcp, timeout=30) as client:
            baseline: list[float] = []
            session: list[float] = []
            for i in range(WARMUP + ITERATIONS):
                started = time.perf_counter()
                await client.call_tool("state_set", {"key": "bench", "value": i})
                if i >= WARMUP:
                    baseline.append((time.perf_counter() - started) * 1000)
            for i in range(WARMUP + ITERATIONS):
                scripts.script.add(
                    step(tool_calls=[call("state_set", key="bench", value=i)]), step("done")
                )
                started = time.perf_counter()
                result = await client.call_tool("trigger", {"prompt": f"set {i}"})
                if i >= WARMUP:
                    session.append((time.perf_counter() - started) * 1000)
                assert result.data["success"], result.data
    finally:
        await services.aclose()
        scripts.stop()
        await pool.close()
        await deprovision(admin_dsn, schema)
    b50, b99 = _percentile(baseline, 0.5), _percentile(baseline, 0.99)
    s50, s99 = _percentile(session, 0.5), _percentile(session, 0.99)
    cpus, python = os.cpu_count(), sys.version.split()[0]
    print(f"bench_spawner: {ITERATIONS} iterations, {cpus} CPUs, Python {python}")
    for label, p50, p99, mean in (
        ("baseline state_set over MCP ", b50, b99, statistics.mean(baseline)),
        ("trigger, 1 tool call session", s50, s99, statistics.mean(session)),
    ):
        print(f"  {label}  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  mean {mean:6.2f} ms")
    print(f"  ratio session/baseline        p50 {s50 / b50:7.1f} x   p99 {s99 / b99:7.1f} x")
    print(f"  goal p50 <= 50 ms: {'met' if s50 <= 50 else 'NOT met'}")


def main() -> None:
    url = os.environ.get("BUTLERS_DATABASE_URL")
    if url:
        asyncio.run(_measure(url))
        return
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "postgres", fsync=False)
        server.start()
        try:
            asyncio.run(_measure(server.admin_dsn()))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
