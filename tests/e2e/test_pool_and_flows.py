"""Pool exhaustion queues and recovers; health and relationship flows through `trigger`."""

import asyncio

from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from .harness.ecosystem import EcosystemHandle

CALLS = 30  # the butler's pool holds at most 10 connections


async def test_calls_queue_on_an_exhausted_pool_and_all_succeed(
    butler_ecosystem: EcosystemHandle,
) -> None:
    schema = butler_ecosystem["health"].schema
    blocker = await butler_ecosystem.admin()
    watcher = await butler_ecosystem.admin()
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
        waiting = 0

        async def pool_exhausted() -> bool:
            nonlocal waiting
            waiting = await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'butler:health' "
                "AND wait_event_type = 'Lock'"
            )
            return waiting >= 10

        await wait_until(pool_exhausted, timeout=15, message="the pool never filled up")
        assert waiting == 10, "every pooled connection should be busy, the rest queued"
        assert not any(call.done() for call in calls)
        await tx.rollback()
        results = await asyncio.wait_for(asyncio.gather(*calls), 30)
    finally:
        await blocker.close()
        await watcher.close()
    assert sorted(r["value"] for r in results) == list(range(CALLS))
    after = await butler_ecosystem.call("health", "measurement_latest", {"type": "pool_probe"})
    assert after is not None


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
