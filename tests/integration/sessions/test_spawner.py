"""The spawner in-process: session contract, session log, serial dispatch, lockdown."""

from __future__ import annotations

import asyncio
import uuid
from itertools import pairwise

import pytest
from fastmcp.exceptions import ToolError

from butlers.testing.script_server import Script, call, offered_tools, step
from tests.support.contracts import REQUIRED_SESSION_FIELDS

from .conftest import make_resource, make_settings

SESSION_FIELDS = REQUIRED_SESSION_FIELDS


async def _count_session_writes(pool) -> None:  # type: ignore[no-untyped-def]
    await pool.execute(
        """
        CREATE TABLE session_writes (op TEXT, status TEXT);
        CREATE FUNCTION note_session_write() RETURNS trigger AS $$
        BEGIN INSERT INTO session_writes VALUES (TG_OP, NEW.status); RETURN NEW; END $$
        LANGUAGE plpgsql;
        CREATE TRIGGER sessions_writes AFTER INSERT OR UPDATE ON sessions
        FOR EACH ROW EXECUTE FUNCTION note_session_write();
        """
    )


async def test_session_calls_a_tool_and_returns_the_final_answer(make_app, llm_script: Script):
    llm_script.add(
        step(tool_calls=[call("state_set", key="goal", value=75)], usage=(10, 3)),
        step("Stored your goal.", usage=(20, 5)),
    )
    app = await make_app()
    result = await app.call("trigger", {"prompt": "Remember 75"})
    assert uuid.UUID(result["session_id"])
    assert result["success"] is True and result["output"] == "Stored your goal."
    assert result["duration_ms"] >= 0
    assert [(c["name"], c["arguments"]) for c in result["tool_calls"]] == [
        ("state_set", {"key": "goal", "value": 75})
    ]
    assert result["tool_calls"][0]["result"]["key"] == "goal"
    assert (result["input_tokens"], result["output_tokens"]) == (30, 8)
    assert await app.call("state_get", {"key": "goal"}) == 75


async def test_session_row_has_every_field_after_completion(make_app, llm_script: Script):
    llm_script.add(step("done", usage=(1, 1)))
    app = await make_app()
    result = await app.call("trigger", {"prompt": "hi", "context": {"a": 1}})
    row = await app.call("sessions_get", {"session_id": result["session_id"]})
    assert all(row[f] is not None for f in SESSION_FIELDS), row
    assert (row["status"], row["butler_name"], row["trigger_source"]) == (
        "completed",
        "health",
        "trigger",
    )
    assert row["context"] == {"a": 1} and row["error"] is None
    assert row["cost_usd"] == 0.0  # the scripted model is priced at zero


async def test_each_session_is_exactly_two_writes(make_app, llm_script: Script, butler_schema):
    await _count_session_writes(butler_schema.pool)
    llm_script.add(step(tool_calls=[call("state_get", key="x")]), step("ok"))
    app = await make_app()
    await app.call("trigger", {"prompt": "go"})
    writes = await butler_schema.pool.fetch("SELECT op, status FROM session_writes")
    assert [(w["op"], w["status"]) for w in writes] == [
        ("INSERT", "running"),
        ("UPDATE", "completed"),
    ]


async def test_concurrent_triggers_run_one_at_a_time(make_app, llm_script: Script):
    llm_script.add(*[step(f"answer {i}", delay=0.02) for i in range(5)])
    app = await make_app()
    results = await asyncio.gather(*(app.call("trigger", {"prompt": f"p{i}"}) for i in range(5)))
    assert all(r["success"] for r in results)
    rows = await app.context.pool.fetch(
        "SELECT created_at, completed_at FROM sessions ORDER BY created_at"
    )
    assert all(a["completed_at"] <= b["created_at"] for a, b in pairwise(rows))


async def test_lock_is_released_after_a_model_error(make_app, llm_script: Script):
    llm_script.add(step(error="model exploded"), step("fine again"))
    app = await make_app()
    failed = await app.call("trigger", {"prompt": "one"})
    assert failed["success"] is False and "model exploded" in failed["error"]
    assert (await app.call("trigger", {"prompt": "two"}))["success"] is True


async def test_timeout_marks_the_session_and_releases_the_lock(make_app, llm_script: Script):
    llm_script.add(step("too late", delay=5.0), step("in time"))
    app = await make_app()
    timed_out = await app.call("trigger", {"prompt": "slow", "timeout_seconds": 1.0})
    assert timed_out["success"] is False and timed_out["error"] == "timeout"
    row = await app.call("sessions_get", {"session_id": timed_out["session_id"]})
    assert row["status"] == "error" and row["error"] == "timeout"
    assert (await app.call("trigger", {"prompt": "fast"}))["output"] == "in time"


async def test_empty_answer_is_not_a_success(make_app, llm_script: Script):
    llm_script.add(step(""))
    app = await make_app()
    result = await app.call("trigger", {"prompt": "say nothing"})
    assert result["success"] is False and result["output"] == ""


async def test_turn_limit_ends_a_session_that_never_answers(make_app, llm_script: Script):
    llm_script.add(*[step(tool_calls=[call("state_get", key="k")]) for _ in range(2)])
    app = await make_app(resource=make_resource(runtime={"maxTurns": 2}))
    result = await app.call("trigger", {"prompt": "loop"})
    assert result["success"] is False and "2 turns" in result["error"]
    assert len(result["tool_calls"]) == 2


async def test_trigger_without_runtime_says_how_to_configure_one(make_app):
    app = await make_app(settings=make_settings())
    with pytest.raises(ToolError, match=r"spec\.runtime\.adapter"):
        await app.call("trigger", {"prompt": "hi"})


async def test_session_sees_only_its_own_tools(make_app, llm_script: Script):
    llm_script.add(step(tool_calls=[call("route", butler="health", prompt="x")]), step("ok"))
    app = await make_app()
    result = await app.call("trigger", {"prompt": "route it"})
    sent, waiting = offered_tools(llm_script.requests[0])
    own = {t.name for t in await app.client.list_tools()}
    closed = {"trigger", "tick", "session_cancel"} | {
        "schedule_create",
        "schedule_update",
        "schedule_delete",
    }
    # The butler's credentials are the owner's: no session lists, writes or re-keys them.
    closed |= {"secret_list", "secret_put", "secret_delete", "secrets_reencrypt"}
    closed |= {"module_set_enabled"}  # what the butler can do is the owner's to change
    # The owner's view of the butler is no session's business (and costs tokens).
    operator = {"status", "sessions_list", "sessions_get", "schedule_list"}
    # The butler's own `load_tools` is for sessions listing over MCP (claude-code); the
    # loop's sessions are offered the loop's, answered by the loop.
    mcp_loader = {"load_tools"}
    assert sent | waiting == own - closed - {"schedule_toggle"} - operator - mcp_loader
    # Every butler has a state store: its tools wait to be loaded by name.
    assert waiting == {"state_get", "state_set", "state_list", "state_delete"}
    listed = sent | waiting
    assert "route" not in listed and result["tool_calls"][0]["is_error"] is True
    assert "not available" in result["tool_calls"][0]["result"]


async def test_secrets_are_redacted_from_tool_calls_and_output(make_app, llm_script: Script):
    secret = "sk-very-secret-value-123"
    resource = make_resource(
        env=[{"name": "HEALTH_TOKEN", "secretKeyRef": {"name": "s", "key": "k"}}]
    )
    settings = make_settings(adapter="scripted", environ={"HEALTH_TOKEN": secret})
    llm_script.add(
        step(tool_calls=[call("state_set", key="leak", value=f"token={secret}")]),
        step(f"I stored {secret}"),
    )
    app = await make_app(resource=resource, settings=settings)
    result = await app.call("trigger", {"prompt": "store the token"})
    row = await app.context.pool.fetchrow(
        "SELECT tool_calls::text AS calls, output FROM sessions WHERE session_id = $1",
        uuid.UUID(result["session_id"]),
    )
    assert secret not in row["calls"] and "[REDACTED]" in row["calls"]
    assert secret not in row["output"] and secret not in str(result)
    assert llm_script.requests[0]["env"] == ["HEALTH_TOKEN"]


async def test_sensitive_arguments_are_masked_in_session_rows_as_in_spans(
    make_app, llm_script: Script
):
    """One redaction policy: an argument named like a credential never reaches the row."""
    login = {"user": "ann", "password": "hunter2-correct-horse"}
    llm_script.add(step(tool_calls=[call("state_set", key="login", value=login)]), step("ok"))
    app = await make_app()
    result = await app.call("trigger", {"prompt": "remember my login"})
    row = await app.call("sessions_get", {"session_id": result["session_id"]})
    [stored] = row["tool_calls"]
    assert stored["arguments"] == {
        "key": "login",
        "value": {"user": "ann", "password": "[REDACTED]"},
    }
    assert "hunter2-correct-horse" not in str(row) and "hunter2-correct-horse" not in str(result)
    # Redaction is of the record only: the tool itself got the real value.
    assert await app.call("state_get", {"key": "login"}) == login


async def test_tool_less_sessions_run_beside_the_butlers_other_sessions(
    make_app, llm_script: Script
):
    # A session with tools holds the baton for 0.6 s; three classifications (no tool at
    # all) do not wait for it, nor for each other.
    llm_script.route("health", step("with tools", delay=0.6), when="tools")
    llm_script.route("health", *[step("[]", delay=0.4) for _ in range(3)])
    app = await make_app()
    spawner = app.built.services.spawner
    start = asyncio.get_running_loop().time()
    working = asyncio.create_task(spawner.trigger("the one with tools"))
    await asyncio.sleep(0.05)
    classified = await asyncio.gather(
        *(spawner.trigger(f"classify {i}", tools=False) for i in range(3))
    )
    elapsed = asyncio.get_running_loop().time() - start
    assert all(r.success for r in classified)
    assert elapsed < 0.9  # serial would be at least 0.6 + 3 x 0.4
    assert (await working).success
    rows = await app.context.pool.fetch(
        "SELECT created_at, completed_at FROM sessions ORDER BY created_at"
    )
    assert len(rows) == 4
    overlapping = [a["completed_at"] > b["created_at"] for a, b in pairwise(rows)]
    assert any(overlapping)
