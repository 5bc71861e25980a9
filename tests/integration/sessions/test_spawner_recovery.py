"""The spawner under repeats, load and crashes: idempotency keys, a bounded queue,
orphaned sessions marked `interrupted`."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from fastmcp.exceptions import ToolError

from butlers.core.spawner import INTERRUPTED
from butlers.testing.script_server import Script, step

from .conftest import make_resource, make_settings


async def _sessions(pool, key: str, *, tool: bool = True) -> list[dict]:  # type: ignore[no-untyped-def]
    """Sessions of a key; the `trigger` tool scopes keys to its caller (here `local`)."""
    rows = await pool.fetch(
        "SELECT session_id::text AS session_id, status FROM sessions WHERE idempotency_key = $1",
        f"local/{key}" if tool else key,
    )
    return [dict(r) for r in rows]


async def test_a_repeated_key_returns_the_first_session_without_running_another(
    make_app, llm_script: Script
):
    llm_script.add(step("Logged once."))
    app = await make_app()
    first = await app.call("trigger", {"prompt": "log it", "idempotency_key": "route:1"})
    again = await app.call("trigger", {"prompt": "log it", "idempotency_key": "route:1"})
    assert (first["duplicate"], again["duplicate"]) == (False, True)
    assert again["session_id"] == first["session_id"] and again["output"] == "Logged once."
    assert len(await _sessions(app.context.pool, "route:1")) == 1


async def test_concurrent_calls_with_one_key_share_one_session(make_app, llm_script: Script):
    llm_script.add(step("Only once.", delay=0.3))
    app = await make_app()
    results = await asyncio.gather(
        *(app.call("trigger", {"prompt": "p", "idempotency_key": "k"}) for _ in range(4))
    )
    assert len({r["session_id"] for r in results}) == 1
    assert sorted(r["duplicate"] for r in results) == [False, True, True, True]
    assert len(await _sessions(app.context.pool, "k")) == 1


async def test_a_key_reused_for_another_prompt_is_a_conflict(make_app, llm_script: Script):
    llm_script.add(step("done"))
    app = await make_app()
    await app.call("trigger", {"prompt": "log 80 kg", "idempotency_key": "k2"})
    with pytest.raises(ToolError, match="already used for a different prompt"):
        await app.call("trigger", {"prompt": "log 90 kg", "idempotency_key": "k2"})


async def test_a_keyed_session_outlives_a_caller_that_went_away(make_app, llm_script: Script):
    llm_script.add(step("Finished anyway.", delay=0.5))
    app = await make_app()
    spawner = app.services.spawner
    caller = asyncio.create_task(spawner.trigger("p", idempotency_key="gone"))
    await asyncio.sleep(0.1)
    caller.cancel()  # the caller's connection dropped
    with pytest.raises(asyncio.CancelledError):
        await caller
    repeat = await spawner.trigger("p", idempotency_key="gone")
    assert repeat.success and repeat.output == "Finished anyway." and repeat.duplicate
    statuses = [s["status"] for s in await _sessions(app.context.pool, "gone", tool=False)]
    assert statuses == ["completed"]


async def test_an_unkeyed_session_is_cancelled_with_its_caller(make_app, llm_script: Script):
    llm_script.add(step("never read", delay=0.5))
    app = await make_app()
    caller = asyncio.create_task(app.services.spawner.trigger("p"))
    await asyncio.sleep(0.1)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    row = await app.context.pool.fetchrow("SELECT status, error FROM sessions")
    assert (row["status"], row["error"]) == ("error", "cancelled: the caller stopped waiting")


@pytest.mark.parametrize("where", ["settings", "spec"])
async def test_a_full_queue_answers_busy_at_once(make_app, llm_script: Script, where: str):
    """The queue's bound comes from the process (BUTLERS_MAX_QUEUED_SESSIONS) or, first,
    from the butler's spec.runtime.maxQueuedSessions."""
    llm_script.add(step("one", delay=0.5), step("two"))
    if where == "settings":
        settings = replace(make_settings(adapter="scripted"), max_queued_sessions=2)
        app = await make_app(settings=settings)
    else:
        settings = replace(make_settings(adapter="scripted"), max_queued_sessions=50)
        app = await make_app(make_resource(runtime={"maxQueuedSessions": 2}), settings)
    running = [asyncio.create_task(app.call("trigger", {"prompt": f"p{i}"})) for i in range(2)]
    await asyncio.sleep(0.1)
    with pytest.raises(ToolError, match="busy: 2 sessions are running or queued"):
        await app.call("trigger", {"prompt": "one too many"})
    assert [r["output"] for r in await asyncio.gather(*running)] == ["one", "two"]
    assert await app.context.pool.fetchval("SELECT count(*) FROM sessions") == 2


async def test_sessions_left_running_by_a_dead_process_are_marked_interrupted(
    make_app, llm_script: Script
):
    app = await make_app()
    orphan = uuid.uuid4()
    await app.context.pool.execute(
        "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, status) "
        "VALUES ($1, 'health', 'trigger', 'lost', 'running')",
        orphan,
    )
    assert await app.services.spawner.recover() == 1
    row = await app.context.pool.fetchrow(
        "SELECT status, error, completed_at FROM sessions WHERE session_id = $1", orphan
    )
    assert (row["status"], row["error"]) == ("interrupted", INTERRUPTED)
    assert row["completed_at"] is not None


async def test_recovery_leaves_the_session_this_process_is_running(make_app, llm_script: Script):
    llm_script.add(step("still mine", delay=0.5))
    app = await make_app()
    spawner = app.services.spawner
    session = asyncio.create_task(spawner.trigger("p"))
    await asyncio.sleep(0.2)
    assert await spawner.recover() == 0
    assert (await session).success
    assert await app.context.pool.fetchval("SELECT status FROM sessions") == "completed"


async def test_a_key_recorded_by_a_dead_process_returns_its_interrupted_session(
    make_app, llm_script: Script
):
    app = await make_app()
    await app.context.pool.execute(
        "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, status, "
        "idempotency_key) VALUES ($1, 'health', 'trigger', 'p', 'running', 'local/route:dead')",
        uuid.uuid4(),
    )
    await app.services.spawner.recover()
    result = await app.call("trigger", {"prompt": "p", "idempotency_key": "route:dead"})
    assert (result["success"], result["duplicate"]) == (False, True)
    assert result["error"] == INTERRUPTED
    assert len(await _sessions(app.context.pool, "route:dead")) == 1


async def test_a_session_left_running_for_weeks_is_interrupted_too(make_app, llm_script: Script):
    """Its duration no longer fits a 32-bit column: the sweep still runs (the butler starts)."""
    app = await make_app()
    old = uuid.uuid4()
    await app.context.pool.execute(
        "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, status, "
        "created_at) "
        "VALUES ($1, 'health', 'trigger', 'lost', 'running', now() - interval '60 days')",
        old,
    )
    assert await app.services.spawner.recover() == 1
    row = await app.context.pool.fetchrow(
        "SELECT status, duration_ms FROM sessions WHERE session_id = $1", old
    )
    assert (row["status"], row["duration_ms"]) == ("interrupted", 2147483647)
