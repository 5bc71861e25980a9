"""The scheduler in-process: spec sync, due tasks, dual dispatch, CRUD, idempotent ticks."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest
from fastmcp.exceptions import ToolError

from butlers.core.scheduler import Scheduler
from butlers.scheduling.jobs import builtin_jobs
from butlers.testing.script_server import Script, step

from .conftest import make_resource

SCHEDULES = [
    {"name": "morning", "cron": "0 8 * * *", "prompt": "Good morning"},
    {"name": "snapshot", "cron": "*/5 * * * *", "job": "state_snapshot"},
]


async def _make_due(pool, name: str) -> None:  # type: ignore[no-untyped-def]
    await pool.execute(
        "UPDATE scheduled_tasks SET next_due_at = now() - interval '1 second' WHERE name = $1",
        name,
    )


async def test_spec_schedules_sync_idempotently(make_app):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    first = await app.call("schedule_list")
    await app.services.scheduler.store.sync_spec(list(app.butler.resource.spec.schedules))
    again = await app.call("schedule_list")
    assert [(r["name"], r["source"]) for r in first] == [("morning", "spec"), ("snapshot", "spec")]
    assert [(r["id"], r["next_due_at"]) for r in again] == [
        (r["id"], r["next_due_at"]) for r in first
    ]


async def test_due_job_task_completes_and_rearms(make_app):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.butler.pool, "snapshot")
    ran = (await app.call("tick"))["ran"]
    assert [(r["name"], r["status"], r["session_id"]) for r in ran] == [
        ("snapshot", "completed", None)
    ]
    task = next(t for t in await app.call("schedule_list") if t["name"] == "snapshot")
    assert task["status"] == "completed"
    assert datetime.fromisoformat(task["next_due_at"]) > datetime.now(UTC)
    assert (await app.call("state_get", {"key": "snapshot:state"}))["task"] == "snapshot"
    assert await app.call("sessions_list") == []


async def test_due_prompt_task_runs_a_session_named_after_it(make_app, llm_script: Script):
    llm_script.add(step("Morning!"))
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.butler.pool, "morning")
    ran = (await app.call("tick"))["ran"]
    session = await app.call("sessions_get", {"session_id": ran[0]["session_id"]})
    assert (session["trigger_source"], session["prompt"], session["status"]) == (
        "schedule:morning",
        "Good morning",
        "completed",
    )


async def test_failed_job_marks_the_task_error(make_app):
    app = await make_app()
    jobs = builtin_jobs()

    async def broken(ctx, **args):  # type: ignore[no-untyped-def]
        raise ValueError("disk on fire")

    jobs.register("broken", broken)
    scheduler = Scheduler(
        butler="health",
        pool=app.butler.pool,
        store=app.services.scheduler.store,
        spawner=app.services.spawner,
        jobs=jobs,
        interval=3600,
    )
    await app.services.scheduler.store.create(
        name="b", cron="* * * * *", prompt=None, job_name="broken", job_args={}, enabled=True
    )
    await _make_due(app.butler.pool, "b")
    ran = await scheduler.tick()
    assert ran[0]["status"] == "error" and "disk on fire" in ran[0]["error"]
    task = await app.services.scheduler.store.get("b")
    assert task["status"] == "error" and "disk on fire" in task["last_error"]


async def test_two_concurrent_ticks_run_a_task_once(make_app, llm_script: Script):
    llm_script.add(step("once", delay=0.1))
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.butler.pool, "morning")
    first, second = await asyncio.gather(app.call("tick"), app.call("tick"))
    assert len(first["ran"]) + len(second["ran"]) == 1
    assert len(await app.call("sessions_list")) == 1


async def test_schedule_crud_round_trip(make_app):
    app = await make_app()
    created = await app.call(
        "schedule_create", {"name": "walk", "cron": "0 7 * * *", "prompt": "Walk"}
    )
    assert created["source"] == "runtime" and created["status"] == "pending"
    updated = await app.call(
        "schedule_update", {"name": "walk", "cron": "30 7 * * *", "enabled": False}
    )
    assert (updated["cron"], updated["enabled"]) == ("30 7 * * *", False)
    assert (await app.call("schedule_toggle", {"name": "walk"}))["enabled"] is True
    assert [t["name"] for t in await app.call("schedule_list")] == ["walk"]
    assert (await app.call("schedule_delete", {"name": "walk"}))["deleted"] is True
    assert await app.call("schedule_list") == []


async def test_duplicate_schedule_name_is_an_error_not_a_second_row(make_app):
    app = await make_app()
    await app.call("schedule_create", {"name": "dup", "cron": "0 7 * * *", "prompt": "x"})
    with pytest.raises(ToolError, match="already exists"):
        await app.call("schedule_create", {"name": "dup", "cron": "0 9 * * *", "prompt": "y"})
    assert len(await app.call("schedule_list")) == 1


async def test_unknown_job_and_bad_cron_are_rejected(make_app):
    app = await make_app()
    with pytest.raises(ToolError, match="no job 'nope'"):
        await app.call("schedule_create", {"name": "j", "cron": "0 7 * * *", "job": "nope"})
    with pytest.raises(ToolError, match="five-field"):
        await app.call("schedule_create", {"name": "c", "cron": "every day", "prompt": "x"})


async def test_background_loop_runs_due_tasks(make_app):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.butler.pool, "snapshot")
    scheduler = Scheduler(
        butler="health",
        pool=app.butler.pool,
        store=app.services.scheduler.store,
        spawner=app.services.spawner,
        jobs=builtin_jobs(),
        interval=0.05,
    )
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        while (await app.services.scheduler.store.get("snapshot"))["status"] != "completed":
            assert time.monotonic() < deadline, "the loop never ran the due task"
            await asyncio.sleep(0.02)
    finally:
        await scheduler.aclose()


async def test_prompt_tasks_reach_the_spawner_with_their_schedule_name(make_app, mock_spawner):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    scheduler = Scheduler(
        butler="health", pool=app.butler.pool, store=app.services.scheduler.store,
        spawner=mock_spawner, jobs=builtin_jobs(), interval=3600,
    )  # fmt: skip
    await _make_due(app.butler.pool, "morning")
    await _make_due(app.butler.pool, "snapshot")
    ran = await scheduler.tick()
    assert sorted(r["name"] for r in ran) == ["morning", "snapshot"]
    assert mock_spawner.invocations == [
        {"prompt": "Good morning", "trigger_source": "schedule:morning", "context": None}
    ]
