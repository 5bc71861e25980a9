"""The spawner end to end: SpawnerResult and session-log contracts, serial dispatch
under load, lock release after errors and timeouts, state as session memory."""

from __future__ import annotations

import asyncio
import uuid
from itertools import pairwise

from butlers.testing.script_server import Script, call, step
from tests.support.contracts import REQUIRED_SESSION_FIELDS

from .harness.ecosystem import EcosystemHandle

SESSION_FIELDS = REQUIRED_SESSION_FIELDS


async def _windows(eco: EcosystemHandle, butler: str, session_ids: list[str]) -> list:
    pool = await eco.pool(butler)
    return await pool.fetch(
        "SELECT status, created_at, completed_at FROM sessions "
        "WHERE session_id::text = ANY($1::text[]) ORDER BY created_at",
        session_ids,
    )


async def test_spawner_result_contract(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "health",
        step(tool_calls=[call("state_set", key="e2e-contract", value={"kg": 80})], usage=(100, 10)),
        step("Logged 80 kg.", usage=(150, 12)),
    )
    result = await butler_ecosystem.call("health", "trigger", {"prompt": "Log my weight: 80kg"})
    assert uuid.UUID(result["session_id"]) and result["duration_ms"] >= 0
    assert result["success"] is True and result["output"] == "Logged 80 kg."
    assert [{k: c[k] for k in ("name", "arguments")} for c in result["tool_calls"]] == [
        {"name": "state_set", "arguments": {"key": "e2e-contract", "value": {"kg": 80}}}
    ]
    assert "result" in result["tool_calls"][0]
    assert (result["input_tokens"], result["output_tokens"]) == (250, 22)


async def test_session_log_row_is_complete_after_two_writes(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    pool = await butler_ecosystem.pool("messenger")
    await pool.execute(
        """
        CREATE TABLE IF NOT EXISTS e2e_session_writes (session_id UUID, op TEXT, status TEXT);
        CREATE OR REPLACE FUNCTION e2e_note_session_write() RETURNS trigger AS $$
        BEGIN INSERT INTO e2e_session_writes VALUES (NEW.session_id, TG_OP, NEW.status);
        RETURN NEW; END $$ LANGUAGE plpgsql;
        DROP TRIGGER IF EXISTS e2e_sessions_writes ON sessions;
        CREATE TRIGGER e2e_sessions_writes AFTER INSERT OR UPDATE ON sessions
        FOR EACH ROW EXECUTE FUNCTION e2e_note_session_write();
        """
    )
    try:
        llm_script.route("messenger", step("Sent.", usage=(5, 2)))
        result = await butler_ecosystem.call("messenger", "trigger", {"prompt": "Send hi"})
        writes = await pool.fetch(
            "SELECT op, status FROM e2e_session_writes WHERE session_id = $1",
            uuid.UUID(result["session_id"]),
        )
    finally:
        await pool.execute("DROP TRIGGER e2e_sessions_writes ON sessions")
    assert [(w["op"], w["status"]) for w in writes] == [
        ("INSERT", "running"),
        ("UPDATE", "completed"),
    ]
    row = await butler_ecosystem.call(
        "messenger", "sessions_get", {"session_id": result["session_id"]}
    )
    assert [f for f in SESSION_FIELDS if row[f] is None] == []
    assert row["error"] is None and row["status"] == "completed"


async def test_five_concurrent_triggers_run_serially(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("relationship", *[step(f"done {i}", delay=0.05) for i in range(5)])
    results = await asyncio.gather(
        *(
            butler_ecosystem.call("relationship", "trigger", {"prompt": f"job {i}"})
            for i in range(5)
        )
    )
    assert all(r["success"] for r in results)
    rows = await _windows(butler_ecosystem, "relationship", [r["session_id"] for r in results])
    assert len(rows) == 5
    assert all(a["completed_at"] <= b["created_at"] for a, b in pairwise(rows))


async def test_ten_concurrent_triggers_finish_without_deadlock(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("general", *[step(f"ok {i}") for i in range(10)])
    async with asyncio.timeout(30):
        results = await asyncio.gather(
            *(butler_ecosystem.call("general", "trigger", {"prompt": f"n{i}"}) for i in range(10))
        )
    assert sum(r["success"] for r in results) == 10
    rows = await _windows(butler_ecosystem, "general", [r["session_id"] for r in results])
    assert all(a["completed_at"] <= b["created_at"] for a, b in pairwise(rows))


async def test_lock_is_released_after_a_runtime_error(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("health", step(error="upstream 500"), step("recovered"))
    failed = await butler_ecosystem.call("health", "trigger", {"prompt": "fail"})
    assert failed["success"] is False and "upstream 500" in failed["error"]
    assert (await butler_ecosystem.call("health", "trigger", {"prompt": "again"}))["success"]


async def test_timeout_logs_the_session_and_releases_the_lock(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("health", step("too slow", delay=5.0), step("quick"))
    slow = await butler_ecosystem.call(
        "health", "trigger", {"prompt": "slow", "timeout_seconds": 1.0}
    )
    assert slow["success"] is False and slow["error"] == "timeout"
    row = await butler_ecosystem.call("health", "sessions_get", {"session_id": slow["session_id"]})
    assert (row["status"], row["error"]) == ("error", "timeout") and row["completed_at"]
    assert (await butler_ecosystem.call("health", "trigger", {"prompt": "fast"}))[
        "output"
    ] == "quick"


async def test_state_store_is_memory_between_sessions(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "health",
        step(tool_calls=[call("state_set", key="e2e-memory", value={"weight_goal": "75kg"})]),
        step("I will remember 75kg."),
        step(tool_calls=[call("state_get", key="e2e-memory")]),
        step("Your weight goal is 75kg."),
    )
    first = await butler_ecosystem.call("health", "trigger", {"prompt": "My goal is 75kg."})
    second = await butler_ecosystem.call("health", "trigger", {"prompt": "What is my goal?"})
    assert first["success"] and second["success"]
    assert second["tool_calls"][0]["result"] == {"weight_goal": "75kg"}
    # The model saw the stored value as the tool result of the second session.
    tool_message = llm_script.requests_for("health")[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "75kg" in tool_message["content"]
    assert "75" in second["output"]
