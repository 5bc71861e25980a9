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
    assert [name for _, name, _ in spec_rows] == ["prune-sessions"]
    await butler_ecosystem.restart("general")
    after = await butler_ecosystem.call("general", "schedule_list")
    assert [(t["id"], t["name"], t["source"]) for t in after if t["source"] == "spec"] == spec_rows


async def test_due_prompt_task_goes_pending_running_completed_and_rearms(
    butler_ecosystem: EcosystemHandle, llm_script: Script, schedule
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


async def test_external_and_scheduled_triggers_interleave_without_starvation(
    butler_ecosystem: EcosystemHandle, llm_script: Script, schedule
) -> None:
    rounds = 3
    llm_script.route("relationship", *[step(f"r{i}", delay=0.05) for i in range(2 * rounds)])
    await schedule("relationship", name="e2e-timer", cron="0 * * * *", prompt="Timer prompt")
    results = []
    for _ in range(rounds):
        await _make_due(butler_ecosystem, "relationship", "e2e-timer")
        external, ticked = await asyncio.gather(
            butler_ecosystem.call(
                "relationship", "trigger", {"prompt": "external", "trigger_source": "e2e-ext"}
            ),
            butler_ecosystem.call("relationship", "tick"),
        )
        assert external["success"] and [r["status"] for r in ticked["ran"]] == ["completed"]
        results += [external["session_id"], ticked["ran"][0]["session_id"]]
    pool = await butler_ecosystem.pool("relationship")
    rows = await pool.fetch(
        "SELECT trigger_source, created_at, completed_at FROM sessions "
        "WHERE session_id::text = ANY($1::text[]) ORDER BY created_at",
        results,
    )
    assert sorted(r["trigger_source"] for r in rows) == ["e2e-ext"] * 3 + ["schedule:e2e-timer"] * 3
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
