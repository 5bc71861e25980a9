"""Reminder delivery lag: from a reminder's due time to the messenger's delivery row.

A health butler (no messenger of its own) holds N one-shot reminders due a few
hundred milliseconds apart; each goes through its delivery loop, the switchboard's
`owner_notify` and the messenger's `notify`. The lag is the messenger row's
`created_at` minus the due time. Baseline, in the same run: this process calls the
messenger's `notify` itself at the same kind of due times (an asyncio timer, then one
MCP call): the floor of any "send at time T" path. Goal: p50 <= 1 s.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg

from _common import ecosystem, summary, user_client
from butlers.db.pool import create_pool

N = 40
SPACING = 0.25  # seconds between due times
LEAD = 1.5  # the first one is due this long after it is created


async def lags(pool: asyncpg.Pool, tags: dict[str, datetime]) -> list[float]:
    """Each tag's first delivery row, minus its due time (no channel is configured, so
    the messenger logs `failed` rows and the reminders retry: only the first counts)."""
    rows = await pool.fetch("SELECT body, created_at FROM deliveries ORDER BY created_at")
    first: dict[str, datetime] = {}
    for row in rows:
        tag = row["body"].rpartition(" ")[2]
        if tag in tags and tag not in first:
            first[tag] = row["created_at"]
    return [(at - tags[tag]).total_seconds() for tag, at in first.items()]


async def all_delivered(pool: asyncpg.Pool, tags: dict[str, datetime]) -> list[float]:
    deadline = asyncio.get_running_loop().time() + LEAD + N * SPACING + 30
    while len(found := await lags(pool, tags)) < len(tags):
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.2)
    return found


async def main() -> None:
    async with ecosystem(["switchboard", "health", "messenger"]) as eco:
        messenger = eco.butlers["messenger"]
        pool = await create_pool(messenger.dsn, messenger.schema, min_size=1, max_size=1)
        async with user_client(eco, "health") as health, user_client(eco, "messenger") as msg:
            # Warm the path (and wait until the messenger is registered with the
            # switchboard: until then the first attempt fails and is retried).
            warm = {"warm-up": datetime.now(UTC) + timedelta(seconds=1)}
            await health.call_tool("remind", {"text": "warm-up", "at": warm["warm-up"].isoformat()})
            await all_delivered(pool, warm)

            start = datetime.now(UTC) + timedelta(seconds=LEAD)
            reminder_tags: dict[str, datetime] = {}
            for i in range(N):
                tag = f"r-{uuid.uuid4().hex[:12]}"
                due = start + timedelta(seconds=i * SPACING)
                made = await health.call_tool("remind", {"text": tag, "at": due.isoformat()})
                reminder_tags[tag] = datetime.fromisoformat(made.data["next_due_at"])
            reminder = await all_delivered(pool, reminder_tags)

            direct_tags: dict[str, datetime] = {}
            start = datetime.now(UTC) + timedelta(seconds=LEAD)
            for i in range(N):
                tag = f"d-{uuid.uuid4().hex[:12]}"
                due = start + timedelta(seconds=i * SPACING)
                direct_tags[tag] = due
                delay = (due - datetime.now(UTC)).total_seconds()
                await asyncio.sleep(max(0.0, delay))
                await msg.call_tool("notify", {"message": f"Reminder: {tag}"})
            direct = await all_delivered(pool, direct_tags)
        await pool.close()

    r, d = summary(reminder), summary(direct)
    print(f"reminder delivery lag over {N} reminders (health -> switchboard -> messenger)")
    print(f"  reminders: p50 {r['p50']:8.1f} ms  p99 {r['p99']:8.1f} ms  (n={r['n']:.0f})")
    print(f"  baseline:  p50 {d['p50']:8.1f} ms  p99 {d['p99']:8.1f} ms  (timer + notify)")
    print(f"  ratio p50: {r['p50'] / d['p50']:.1f}x   goal: reminders p50 <= 1000 ms")
    if r["n"] < N:
        print(f"  note: only {r['n']:.0f} of {N} reminders reached the messenger")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as exc:  # a benchmark reports, never fails the build
        print(f"bench_reminders: could not complete: {exc.__class__.__name__}: {exc}")
    sys.exit(0)
