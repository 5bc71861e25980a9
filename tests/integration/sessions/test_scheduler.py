"""The scheduler in-process: spec sync, due tasks, dual dispatch, CRUD, idempotent ticks."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from fastmcp.exceptions import ToolError

from butlers.core.scheduler import Scheduler
from butlers.core.spawner import SpawnerBusy, SpawnerResult
from butlers.scheduling.jobs import builtin_jobs
from butlers.scheduling.validation import ScheduleError
from butlers.testing.script_server import Script, step
from butlers.waiting import wait_until

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
    await app.services.scheduler.store.sync_spec(list(app.context.resource.spec.schedules))
    again = await app.call("schedule_list")
    assert [(r["name"], r["source"]) for r in first] == [("morning", "spec"), ("snapshot", "spec")]
    assert [(r["id"], r["next_due_at"]) for r in again] == [
        (r["id"], r["next_due_at"]) for r in first
    ]


async def test_due_job_task_completes_and_rearms(make_app):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.context.pool, "snapshot")
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
    await _make_due(app.context.pool, "morning")
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
        pool=app.context.pool,
        store=app.services.scheduler.store,
        spawner=app.services.spawner,
        jobs=jobs,
        interval=3600,
    )
    await app.services.scheduler.store.create(
        name="b", cron="* * * * *", prompt=None, job_name="broken", job_args={}, enabled=True
    )
    await _make_due(app.context.pool, "b")
    ran = await scheduler.tick()
    assert ran[0].status == "error" and "disk on fire" in (ran[0].error or "")
    task = await app.services.scheduler.store.get("b")
    assert task is not None
    assert task.status == "error" and "disk on fire" in (task.last_error or "")


async def test_two_concurrent_ticks_run_a_task_once(make_app, llm_script: Script):
    llm_script.add(step("once", delay=0.1))
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.context.pool, "morning")
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


async def test_updates_are_validated_like_the_spec(make_app):
    """One validation: an update that would make an invalid schedule changes nothing."""
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    with pytest.raises(ToolError, match="cron: .*five-field"):
        await app.call("schedule_update", {"name": "morning", "cron": "61 * * * *"})
    with pytest.raises(ToolError, match="exactly one of 'prompt' or 'job'"):
        await app.call("schedule_update", {"name": "snapshot", "prompt": "be an LLM now"})
    with pytest.raises(ToolError, match="no schedule named 'nope'"):
        await app.call("schedule_update", {"name": "nope", "enabled": False})
    assert [(t["name"], t["cron"], t["prompt"]) for t in await app.call("schedule_list")] == [
        ("morning", "0 8 * * *", "Good morning"),
        ("snapshot", "*/5 * * * *", None),
    ]


async def test_a_spec_schedule_naming_an_unknown_job_stops_the_butler_with_its_name(make_app):
    bad = [*SCHEDULES, {"name": "typo", "cron": "0 3 * * *", "job": "prune_sesions"}]
    with pytest.raises(ScheduleError, match=r"spec\.schedules\[2\]\.job: no job 'prune_sesions'"):
        await make_app(resource=make_resource(schedules=bad))


async def test_background_loop_runs_due_tasks(make_app):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    await _make_due(app.context.pool, "snapshot")
    scheduler = Scheduler(
        butler="health",
        pool=app.context.pool,
        store=app.services.scheduler.store,
        spawner=app.services.spawner,
        jobs=builtin_jobs(),
        interval=0.05,
    )
    scheduler.start()
    try:

        async def completed() -> bool:
            task = await app.services.scheduler.store.get("snapshot")
            return task is not None and task.status == "completed"

        await wait_until(
            completed, timeout=10, interval=0.02, message="the loop never ran the due task"
        )
    finally:
        await scheduler.aclose()


async def test_prompt_tasks_reach_the_spawner_with_their_schedule_name(make_app, mock_spawner):
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    scheduler = Scheduler(
        butler="health", pool=app.context.pool, store=app.services.scheduler.store,
        spawner=mock_spawner, jobs=builtin_jobs(), interval=3600,
    )  # fmt: skip
    await _make_due(app.context.pool, "morning")
    await _make_due(app.context.pool, "snapshot")
    ran = await scheduler.tick()
    assert sorted(r.name for r in ran) == ["morning", "snapshot"]
    assert mock_spawner.invocations == [
        {"prompt": "Good morning", "trigger_source": "schedule:morning", "context": None}
    ]
    [key] = mock_spawner.keys
    assert key is not None and key.startswith("schedule:")  # one session per firing


async def test_a_failed_or_refused_session_marks_its_task_error_and_rearms_it(
    make_app, mock_spawner
):
    """The session a firing ran failed (first tick), then the spawner was busy (second):
    each time the task is `error` with the reason, keeps the session it ran, and is due
    again at its next cron time rather than retried in a loop."""
    app = await make_app(resource=make_resource(schedules=SCHEDULES))
    pool = app.context.pool
    scheduler = Scheduler(
        butler="health", pool=pool, store=app.services.scheduler.store,
        spawner=mock_spawner, jobs=builtin_jobs(), interval=3600,
    )  # fmt: skip
    failed = SpawnerResult(
        session_id=str(uuid.uuid4()), success=False, output=None,
        error="model refused: quota exceeded", duration_ms=5,
    )  # fmt: skip
    mock_spawner.queue(failed)
    mock_spawner.queue(SpawnerBusy("health is busy: 8 sessions queued"))
    await _make_due(pool, "morning")
    [first] = await scheduler.tick()
    assert (first.status, first.error, first.session_id) == (
        "error",
        "model refused: quota exceeded",
        failed.session_id,
    )
    row = await pool.fetchrow("SELECT * FROM scheduled_tasks WHERE name = 'morning'")
    assert (row["status"], row["last_error"]) == ("error", "model refused: quota exceeded")
    assert row["next_due_at"] > datetime.now(UTC)
    await _make_due(pool, "morning")
    [second] = await scheduler.tick()
    assert (second.status, second.session_id) == ("error", None)
    assert "busy" in (second.error or "")
    assert len(mock_spawner.invocations) == 2
    assert await scheduler.tick() == []
