"""Pool exhaustion queues and recovers; health and relationship flows through `trigger`."""

import asyncio

from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from .harness.ecosystem import EcosystemHandle

CALLS = 30


async def test_calls_queue_on_an_exhausted_pool_and_all_succeed(
    butler_ecosystem: EcosystemHandle,
) -> None:
    """More calls than the butler's pool has connections, all stuck behind a table lock:
    every connection is busy (the pool reports itself full, that many backends wait on
    the lock, never more), the rest queue on the pool, and all succeed once it frees."""
    pool_size = (await butler_ecosystem.call("health", "status"))["pool"]["max_size"]
    assert 0 < pool_size < CALLS, f"the pool holds {pool_size}: {CALLS} calls cannot exhaust it"
    schema = butler_ecosystem["health"].schema
    blocker = await butler_ecosystem.admin()
    watcher = await butler_ecosystem.admin()

    async def lock_waiters() -> int:
        return await watcher.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'butler:health' "
            "AND wait_event_type = 'Lock'"
        )

    async def exhausted() -> bool:
        pool = (await butler_ecosystem.call("health", "status"))["pool"]
        return (pool["size"], pool["idle"]) == (pool_size, 0) and (
            await lock_waiters() == pool_size
        )

    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute(f'LOCK TABLE "{schema}".measurements IN EXCLUSIVE MODE')
        calls = [
            asyncio.create_task(
                butler_ecosystem.call(
                    "health", "measurement_log", {"type": "pool_probe", "value": i}
                )
            )
            for i in range(CALLS)
        ]
        await wait_until(
            exhausted,
            timeout=20,
            message=lambda: f"the pool of {pool_size} was never seen full and waiting",
        )
        assert not any(call.done() for call in calls)
        assert await lock_waiters() == pool_size
        await tx.rollback()
        results = await asyncio.wait_for(asyncio.gather(*calls), 30)
    finally:
        await blocker.close()
        await watcher.close()
    assert sorted(r["value"] for r in results) == list(range(CALLS))
    pool = await butler_ecosystem.pool("health")
    stored = await pool.fetchval("SELECT count(*) FROM measurements WHERE type = 'pool_probe'")
    assert stored == CALLS


async def test_health_flow_logs_weight_into_measurements(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=80, unit="kg")]),
        step("Logged your weight: 80 kg."),
    )
    result = await butler_ecosystem.call("health", "trigger", {"prompt": "Log my weight: 80kg"})
    assert result["success"] is True
    assert [c["name"] for c in result["tool_calls"]] == ["measurement_log"]
    pool = await butler_ecosystem.pool("health")
    row = await pool.fetchrow(
        "SELECT type, value, unit FROM measurements WHERE type ILIKE '%weight%' "
        "ORDER BY created_at DESC LIMIT 1"
    )
    assert row is not None and row["value"] == 80 and row["unit"] == "kg"


async def test_relationship_flow_adds_a_contact(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_add", "arguments": {"name": "Sarah Johnson"}}]),
        step("Added Sarah Johnson."),
    )
    result = await butler_ecosystem.call(
        "relationship", "trigger", {"prompt": "Add Sarah Johnson as a new contact"}
    )
    assert result["success"] is True
    assert [c["name"] for c in result["tool_calls"]] == ["contact_add"]
    pool = await butler_ecosystem.pool("relationship")
    rows = await pool.fetch("SELECT name FROM contacts WHERE name ILIKE '%sarah%'")
    assert "Sarah Johnson" in [r["name"] for r in rows]
