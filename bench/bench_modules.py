"""`measurement_log` over MCP versus the same INSERT over raw asyncpg.

Starts a throwaway embedded PostgreSQL and the roster's `health` butler as a real
process, then times N calls of each, sequentially: a persistent fastmcp Client over
streamable HTTP, and a raw asyncpg connection as the butler's own role. Prints p50
and p99 and their ratios; never fails on timing.
"""

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from fastmcp import Client

from butlers.core.context import ButlerContext
from butlers.daemon.server import build_server, install_schema_lookup
from butlers.db.embedded import EmbeddedPostgres
from butlers.db.pool import create_pool, dumps
from butlers.ecosystem.supervisor import ButlerProcess, Ecosystem
from butlers.modules.loader import start_modules
from butlers.roster import load_roster
from butlers.settings import EcosystemSettings

ROOT = Path(__file__).resolve().parent.parent
N = 500
WARMUP = 50
INSERT = (
    "INSERT INTO measurements (type, value, unit, measured_at, notes) "
    "VALUES ($1, $2::text::jsonb, $3, COALESCE($4, clock_timestamp()), $5) "
    "RETURNING id, type, value, unit, measured_at, notes"
)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


async def _time_mcp(url: Any, tool: str) -> list[float]:
    samples = []
    async with Client(url, timeout=30) as client:
        for i in range(WARMUP + N):
            started = time.perf_counter()
            if tool == "measurement_log":
                args = {"type": "weight", "value": 80 + i % 5, "unit": "kg"}
            else:
                args = {"key": "bench", "value": i}
            await client.call_tool(tool, args)
            if i >= WARMUP:
                samples.append(time.perf_counter() - started)
    return samples


async def _time_in_memory(butler: ButlerProcess) -> list[float]:
    """The same tool through an in-process FastMCP server: tool cost without HTTP."""
    pool = await create_pool(butler.dsn, butler.schema)
    context = ButlerContext(resource=butler.resource, schema=butler.schema, pool=pool)
    mcp = build_server(context)
    modules = await start_modules(mcp, context)
    await install_schema_lookup(mcp)
    try:
        return await _time_mcp(mcp, "measurement_log")
    finally:
        await modules.stop()
        await pool.close()


async def _time_asyncpg(dsn: str, schema: str) -> list[float]:
    samples = []
    conn = await asyncpg.connect(dsn, timeout=10, server_settings={"search_path": schema})
    try:
        for i in range(WARMUP + N):
            started = time.perf_counter()
            await conn.fetchrow(INSERT, "weight", dumps(80 + i % 5), "kg", None, None, timeout=10)
            if i >= WARMUP:
                samples.append(time.perf_counter() - started)
    finally:
        await conn.close()
    return samples


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-modules-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg", fsync=False)
        server.start()
        try:
            settings = EcosystemSettings(
                data_dir=Path(tmp) / "eco",
                roster_dir=ROOT / "roster",
                database_url=server.admin_dsn(),
                schema_prefix="bench_",
                free_ports=True,
                log_level="WARNING",
            )
            resources = [r for r in load_roster(ROOT / "roster") if r.name == "health"]
            ecosystem = Ecosystem(settings=settings, resources=resources, fsync=False)
            await ecosystem.start()
            try:
                butler = ecosystem.butlers["health"]
                mcp = await _time_mcp(butler.url, "measurement_log")
                core = await _time_mcp(butler.url, "state_set")
                memory = await _time_in_memory(butler)
                raw = await _time_asyncpg(butler.dsn, butler.schema)
            finally:
                await ecosystem.stop()
        finally:
            server.stop()
    mcp_p50, mcp_p99 = _percentiles(mcp)
    raw_p50, raw_p99 = _percentiles(raw)
    core_p50, core_p99 = _percentiles(core)
    mem_p50, mem_p99 = _percentiles(memory)
    print(f"measurement_log, {N} sequential calls each (after {WARMUP} warm-up)")
    print(f"  raw asyncpg INSERT : p50 {raw_p50:7.3f} ms   p99 {raw_p99:7.3f} ms")
    print(f"  MCP over HTTP      : p50 {mcp_p50:7.3f} ms   p99 {mcp_p99:7.3f} ms")
    print(f"  in-memory MCP      : p50 {mem_p50:7.3f} ms   p99 {mem_p99:7.3f} ms")
    print(f"  core state_set MCP : p50 {core_p50:7.3f} ms   p99 {core_p99:7.3f} ms")
    print(f"  ratio MCP / raw    : p50 {mcp_p50 / raw_p50:7.1f} x   p99 {mcp_p99 / raw_p99:7.1f} x")


if __name__ == "__main__":
    asyncio.run(main())
