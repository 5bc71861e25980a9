"""State tools over a persistent MCP client vs the same SQL over raw asyncpg.

Prints p50/p99 latency of `state_get` and `state_set` through a butler process
(streamable HTTP, one persistent client) and of the identical statement on a
raw asyncpg connection as the butler's role, and their ratio (goal: p50 <= 4).
Then the throughput of 20 concurrent clients against one butler.
"""

from __future__ import annotations

import asyncio
import sys
import time

from fastmcp import Client

from _common import ecosystem, summary, timed, user_client
from butlers.db.pool import create_pool, dumps

N = 1000
CLIENTS = 20
CALLS_PER_CLIENT = 100


async def main() -> None:
    async with ecosystem(["health"]) as eco:
        butler = eco.butlers["health"]
        pool = await create_pool(butler.dsn, butler.schema, min_size=1, max_size=1)
        async with user_client(eco, "health") as client:
            await client.call_tool("state_set", {"key": "bench", "value": {"weight": 80}})

            async def mcp_get() -> object:
                return await client.call_tool("state_get", {"key": "bench"})

            async def mcp_set() -> object:
                return await client.call_tool(
                    "state_set", {"key": "bench", "value": {"weight": 81}}
                )

            async def sql_get() -> object:
                return await pool.fetchrow("SELECT value FROM state WHERE key = $1", "bench")

            async def sql_set() -> object:
                return await pool.fetchval(
                    "INSERT INTO state (key, value) VALUES ($1, $2::text::jsonb) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, "
                    "updated_at = clock_timestamp() RETURNING updated_at",
                    "bench",
                    dumps({"weight": 81}),
                )

            rows = []
            for label, mcp_fn, sql_fn in (
                ("state_get", mcp_get, sql_get),
                ("state_set", mcp_set, sql_set),
            ):
                baseline = summary(await timed(sql_fn, N))
                measured = summary(await timed(mcp_fn, N))
                rows.append((label, measured, baseline))

        print(f"state tools over MCP (streamable HTTP, persistent client) vs raw asyncpg, n={N}")
        print(
            f"{'tool':<10} {'mcp p50':>9} {'mcp p99':>9} {'sql p50':>9} "
            f"{'sql p99':>9} {'ratio p50':>10}"
        )
        for label, m, b in rows:
            ratio = m["p50"] / b["p50"]
            print(
                f"{label:<10} {m['p50']:>7.2f}ms {m['p99']:>7.2f}ms {b['p50']:>7.2f}ms "
                f"{b['p99']:>7.2f}ms {ratio:>9.2f}x  "
                f"(goal <= 4: {'met' if ratio <= 4 else 'NOT met'})"
            )
        await pool.close()

        clients = [user_client(eco, "health") for _ in range(CLIENTS)]
        for c in clients:
            await c.__aenter__()

        async def worker(c: Client) -> None:  # type: ignore[type-arg]
            for _ in range(CALLS_PER_CLIENT):
                await c.call_tool("state_get", {"key": "bench"})

        start = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - start
        for c in clients:
            await c.__aexit__(None, None, None)
        total = CLIENTS * CALLS_PER_CLIENT
        single = 1000 / rows[0][1]["p50"]
        print(
            f"throughput: {CLIENTS} concurrent clients, {total} state_get calls in {elapsed:.2f} s "
            f"= {total / elapsed:.0f} calls/s ({total / elapsed / single:.2f}x one client's rate)"
        )


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
