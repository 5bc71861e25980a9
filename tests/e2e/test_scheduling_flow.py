"""The scheduling domain end to end (document 000): spec sync, due tasks, dual dispatch,
interleaving with external triggers, CRUD over MCP, idempotent ticks, staggering."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from itertools import pairwise

import pytest
from fastmcp.exceptions import ToolError

from butlers.scheduling.cron import MAX_STAGGER, stagger_offset
from butlers.testing.script_server import Script, step
from butlers.waiting import wait_until

from .harness.ecosystem import EcosystemHandle
from .harness.golden import flow_golden
from .harness.normalize import Normalizer


async def _make_due(eco: EcosystemHandle, butler: str, name: str) -> None:
    pool = await eco.pool(butler)
    await pool.execute(
        "UPDATE scheduled_tasks SET next_due_at = now() - interval '1 second' WHERE name = $1",
        name,
    )


async def _task(eco: EcosystemHandle, butler: str, name: str) -> dict:
    pool = await eco.pool(butler)
    row = await pool.fetchrow("SELECT * FROM scheduled_tasks WHERE name = $1", name)
    assert row is not None, f"no task {name} on {butler}"
    return dict(row)


@pytest.fixture
async def schedule(butler_ecosystem: EcosystemHandle):
    """Create schedules for one test and delete them afterwards: `await schedule(b, **args)`."""
    created: list[tuple[str, str]] = []

    async def create(butler: str, **arguments) -> dict:
        row = await butler_ecosystem.call(butler, "schedule_create", arguments)
        created.append((butler, arguments["name"]))
        return row

    yield create
    for butler, name in created:
        await butler_ecosystem.call(butler, "schedule_delete", {"name": name})


async def test_spec_schedules_are_synced_and_restart_adds_no_duplicate(
    butler_ecosystem: EcosystemHandle,
) -> None:
    before = await butler_ecosystem.call("general", "schedule_list")
    spec_rows = [(t["id"], t["name"], t["source"]) for t in before if t["source"] == "spec"]
    assert sorted(name for _, name, _ in spec_rows) == [
        "memory-consolidate",
        "morning-briefing",
        "prune-sessions",
    ]
    await butler_ecosystem.restart("general")
    after = await butler_ecosystem.call("general", "schedule_list")
    assert [(t["id"], t["name"], t["source"]) for t in after if t["source"] == "spec"] == spec_rows


async def test_due_prompt_task_goes_pending_running_completed_and_rearms(
    butler_ecosystem: EcosystemHandle, llm_script: Script, schedule, update_golden: bool
) -> None:
    llm_script.route("health", step("Checked in.", delay=0.5))
    await schedule("health", name="e2e-checkin", cron="0 * * * *", prompt="Daily check-in")
    assert (await _task(butler_ecosystem, "health", "e2e-checkin"))["status"] == "pending"
    await _make_due(butler_ecosystem, "health", "e2e-checkin")
    tick = asyncio.create_task(butler_ecosystem.call("health", "tick"))

    async def running() -> bool:
        assert not tick.done(), "task never seen running"
        return (await _task(butler_ecosystem, "health", "e2e-checkin"))["status"] == "running"

    await wait_until(running, timeout=10, interval=0.02, message="task never seen running")
    ran = (await tick)["ran"]
    task = await _task(butler_ecosystem, "health", "e2e-checkin")
    assert [(r["name"], r["status"]) for r in ran] == [("e2e-checkin", "completed")]
    assert task["status"] == "completed" and task["next_due_at"] > datetime.now(UTC)
    session = await butler_ecosystem.call(
        "health", "sessions_get", {"session_id": ran[0]["session_id"]}
    )
    assert session["trigger_source"] == "schedule:e2e-checkin"
    normalizer = Normalizer()
    normalizer.register(ran[0]["session_id"], "SESSION_ID")
    normalizer.register(str(task["id"]), "TASK_ID")
    problems = flow_golden(
        "scheduling-prompt-task",
        "test_due_prompt_task_goes_pending_running_completed_and_rearms",
        {"01_tick_answer.json": ran, "02_task.json": task, "03_session.json": session},
        normalizer,
        update=update_golden,
    )
    assert not problems, "\n\n".join(problems)


async def test_job_task_runs_python_without_a_session(
    butler_ecosystem: EcosystemHandle, schedule
) -> None:
    await schedule("general", name="e2e-snapshot", cron="*/5 * * * *", job="state_snapshot")
    await _make_due(butler_ecosystem, "general", "e2e-snapshot")
    ran = (await butler_ecosystem.call("general", "tick"))["ran"]
    assert [(r["name"], r["status"], r["session_id"]) for r in ran] == [
        ("e2e-snapshot", "completed", None)
    ]
    snapshot = await butler_ecosystem.call("general", "state_get", {"key": "snapshot:state"})
    assert snapshot["task"] == "e2e-snapshot"
    sessions = await butler_ecosystem.call(
        "general", "sessions_list", {"trigger_source": "schedule:e2e-snapshot"}
    )
    assert sessions == []


async def _queued(eco: EcosystemHandle, butler: str) -> int:
    return int((await eco.call(butler, "status"))["sessions"]["queued"])


async def test_external_and_scheduled_triggers_interleave_without_starvation(
    butler_ecosystem: EcosystemHandle, llm_script: Script, schedule
) -> None:
    """While a session holds the butler, triggers queue in arrival order whatever their
    source: a scheduled trigger that arrived before three external ones runs before all
    of them, and an external one that arrived before a scheduled one runs first. Arrival
    is made certain by the butler's own queue count (`status.sessions.queued`)."""
    eco = butler_ecosystem
    await schedule("relationship", name="e2e-timer", cron="0 * * * *", prompt="Timer prompt")
    llm_script.route("relationship", step("timer done"), step("timer done"), when="Timer prompt")
    for n in (1, 2):
        llm_script.route("relationship", step("blocker done", hold=f"busy-{n}"), when=f"block {n}")
    for name in ("ext 1-0", "ext 1-1", "ext 1-2", "ext 2-0"):
        llm_script.route("relationship", step(f"{name} done"), when=name)

    def external(name: str) -> asyncio.Task[dict]:
        return asyncio.create_task(
            eco.call("relationship", "trigger", {"prompt": name, "trigger_source": "e2e-ext"})
        )

    async def queued(count: int) -> bool:
        return await _queued(eco, "relationship") == count

    sessions: list[str] = []
    for n, arrivals in ((1, ["tick", "ext 1-0", "ext 1-1", "ext 1-2"]), (2, ["ext 2-0", "tick"])):
        blocker = asyncio.create_task(
            eco.call(
                "relationship", "trigger", {"prompt": f"block {n}", "trigger_source": "e2e-block"}
            )
        )
        tasks = [blocker]
        try:
            await wait_until(lambda n=n: llm_script.held(f"busy-{n}") == 1, timeout=20)
            for position, arrival in enumerate(arrivals, start=1):
                if arrival == "tick":
                    await _make_due(eco, "relationship", "e2e-timer")
                    tasks.append(asyncio.create_task(eco.call("relationship", "tick")))
                else:
                    tasks.append(external(arrival))
                await wait_until(
                    lambda count=position: queued(count),
                    timeout=20,
                    message=f"{arrival} never queued behind the running session",
                )
        finally:
            llm_script.release(f"busy-{n}")
        for task in tasks:
            result = await asyncio.wait_for(task, 30)
            if "ran" in result:  # a tick: it ran the timer's session
                [result] = result["ran"]
                assert result["status"] == "completed", result
            else:
                assert result["success"], result
            sessions.append(result["session_id"])
    pool = await eco.pool("relationship")
    rows = await pool.fetch(
        "SELECT trigger_source, created_at, completed_at FROM sessions "
        "WHERE session_id::text = ANY($1::text[]) ORDER BY created_at",
        sessions,
    )
    order = [r["trigger_source"] for r in rows]
    assert order == [
        *("e2e-block", "schedule:e2e-timer", "e2e-ext", "e2e-ext", "e2e-ext"),
        *("e2e-block", "e2e-ext", "schedule:e2e-timer"),
    ], order
    assert all(a["completed_at"] <= b["created_at"] for a, b in pairwise(rows))


async def test_schedule_crud_over_mcp(butler_ecosystem: EcosystemHandle) -> None:
    call = butler_ecosystem.call
    created = await call(
        "messenger", "schedule_create", {"name": "e2e-crud", "cron": "0 7 * * *", "prompt": "x"}
    )
    assert created["source"] == "runtime"
    with pytest.raises(ToolError, match="already exists"):
        await call(
            "messenger", "schedule_create", {"name": "e2e-crud", "cron": "0 9 * * *", "prompt": "y"}
        )
    updated = await call(
        "messenger", "schedule_update", {"name": "e2e-crud", "cron": "0 9 * * *", "enabled": False}
    )
    assert (updated["cron"], updated["enabled"]) == ("0 9 * * *", False)
    assert (await call("messenger", "schedule_toggle", {"name": "e2e-crud"}))["enabled"] is True
    names = [t["name"] for t in await call("messenger", "schedule_list")]
    assert names.count("e2e-crud") == 1
    assert (await call("messenger", "schedule_delete", {"name": "e2e-crud"}))["deleted"] is True
    assert "e2e-crud" not in [t["name"] for t in await call("messenger", "schedule_list")]


async def test_two_quick_ticks_run_a_due_task_once(
    butler_ecosystem: EcosystemHandle, llm_script: Script, schedule
) -> None:
    llm_script.route("general", step("only once", delay=0.1))
    await schedule("general", name="e2e-once", cron="0 * * * *", prompt="Once")
    await _make_due(butler_ecosystem, "general", "e2e-once")
    first, second = await asyncio.gather(
        butler_ecosystem.call("general", "tick"), butler_ecosystem.call("general", "tick")
    )
    ran = [r for r in first["ran"] + second["ran"] if r["name"] == "e2e-once"]
    assert len(ran) == 1
    sessions = await butler_ecosystem.call(
        "general", "sessions_list", {"trigger_source": "schedule:e2e-once"}
    )
    assert len(sessions) == 1


async def test_identical_crons_are_staggered_per_butler(
    butler_ecosystem: EcosystemHandle, schedule
) -> None:
    cron = "0 * * * *"
    offsets = {}
    for butler in ("health", "general", "relationship", "messenger"):
        row = await schedule(butler, name="e2e-stagger", cron=cron, prompt="hourly")
        due = datetime.fromisoformat(row["next_due_at"])
        offsets[butler] = due.minute * 60 + due.second
    for butler, seconds in offsets.items():
        assert seconds == stagger_offset(butler, cron).total_seconds()
        assert seconds < min(MAX_STAGGER.total_seconds(), 3600)
    assert len(set(offsets.values())) > 1
