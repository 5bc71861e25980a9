"""Per-model-call records (`llm_calls`) and cancelling a running session, in-process."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import replace

from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from .conftest import make_resource, make_settings


async def test_each_model_call_is_recorded_with_its_tokens_timing_and_exchange(
    make_app, llm_script: Script
):
    secret = "sk-very-secret-value-123"
    resource = make_resource(
        env=[{"name": "HEALTH_TOKEN", "secretKeyRef": {"name": "s", "key": "k"}}]
    )
    settings = make_settings(adapter="scripted", environ={"HEALTH_TOKEN": secret})
    # Priced per million tokens: input 1, output 2, cache reads 0.1, cache writes 1.25.
    settings = replace(settings, prices={"scripted": (1e6, 2e6, 1e5, 1.25e6)})
    first = step(tool_calls=[call("state_set", key="goal", value=75)])
    first["usage"] = {
        "input_tokens": 40,
        "output_tokens": 6,
        "cached_tokens": 32,
        "cache_write_tokens": 4,
    }
    llm_script.add(first, step("Stored your goal.", usage=(55, 4)))
    app = await make_app(resource=resource, settings=settings)
    result = await app.call("trigger", {"prompt": f"Remember 75 (key {secret})"})
    assert result["success"] and result["llm_call_count"] == 2

    row = await app.call("sessions_get", {"session_id": result["session_id"]})
    assert row["llm_call_count"] == 2
    one, two = row["llm_calls"]
    assert [one["seq"], two["seq"]] == [0, 1]
    assert one["model"] == two["model"] == "scripted"
    assert (one["input_tokens"], one["output_tokens"], one["cached_tokens"]) == (40, 6, 32)
    assert (two["input_tokens"], two["output_tokens"], two["cached_tokens"]) == (55, 4, None)
    assert one["duration_ms"] >= 0 and one["started_at"] <= two["started_at"]
    # The first request carries the prompt and the tools offered (the state tools wait
    # behind load_tools; called by name, state_set ran all the same); the second only
    # what was added since: the assistant's call and the tool's result.
    assert "Remember 75" in one["request"]["messages"][0]["content"]
    assert "load_tools" in one["request"]["tools"] and "state_set" not in one["request"]["tools"]
    assert "tools" not in two["request"]
    assert [m["role"] for m in two["request"]["messages"]] == ["assistant", "tool"]
    assert one["response"]["tool_calls"][0]["name"] == "state_set"
    assert two["response"] == {"text": "Stored your goal.", "tool_calls": []}
    assert secret not in json.dumps(row["llm_calls"]) and "[REDACTED]" in json.dumps(one)
    # The session's totals are the sum of its calls.
    assert (row["input_tokens"], row["output_tokens"]) == (95, 10)
    assert one["cache_write_tokens"] == 4 and two["cache_write_tokens"] is None
    assert (row["cached_tokens"], row["cache_write_tokens"]) == (32, 4)
    # Priced at the cache rates: 59 plain + 32 read x 0.1 + 4 written x 1.25, 10 out x 2.
    assert float(row["cost_usd"]) == result["cost_usd"] == 59 + 3.2 + 5 + 20


async def test_a_failed_model_call_is_recorded_with_its_error(make_app, llm_script: Script):
    llm_script.add(step(error="upstream 500"))
    app = await make_app()
    result = await app.call("trigger", {"prompt": "fail"})
    assert not result["success"]
    row = await app.call("sessions_get", {"session_id": result["session_id"]})
    [failed] = row["llm_calls"]
    assert "upstream 500" in failed["error"] and failed["response"] is None


async def test_cancelling_a_running_session_stops_it_and_ends_it_cancelled(
    make_app, llm_script: Script
):
    # The model takes 30 s to answer, then would store something: neither may happen.
    llm_script.add(step(tool_calls=[call("state_set", key="late", value=1)], delay=30))
    app = await make_app()
    spawner = app.built.services.spawner
    started = time.monotonic()
    trigger = asyncio.create_task(app.call("trigger", {"prompt": "slow"}))

    async def running() -> str | None:
        rows = await app.call("sessions_list", {"status": "running"})
        return rows[0]["session_id"] if rows else None

    session_id = await wait_until(running, timeout=10, interval=0.02)
    await wait_until(lambda: len(llm_script.requests) == 1, timeout=10, interval=0.02)
    row = await app.call("session_cancel", {"session_id": session_id})
    assert row["status"] == "cancelled" and row["error"].startswith("cancelled by ")
    result = await asyncio.wait_for(trigger, 5)
    assert result["success"] is False and result["error"] == row["error"]
    assert time.monotonic() - started < 15, "the runtime ran on after the cancel"
    assert not spawner.activity()["running"]
    assert await app.context.pool.fetchval("SELECT count(*) FROM state") == 0
    [aborted] = (await app.call("sessions_get", {"session_id": session_id}))["llm_calls"]
    assert aborted["error"] == "cancelled"
    # The butler's next session runs at once (the baton was released).
    llm_script.add(step("next"))
    assert (await asyncio.wait_for(app.call("trigger", {"prompt": "next"}), 10))["success"]


async def test_cancelling_a_session_that_is_not_running_is_refused(make_app, llm_script):
    llm_script.add(step("done"))
    app = await make_app()
    done = await app.call("trigger", {"prompt": "quick"})
    for session_id in (done["session_id"], str(uuid.uuid4())):
        result = await app.client.call_tool(
            "session_cancel", {"session_id": session_id}, raise_on_error=False
        )
        assert result.is_error and "is not running" in result.content[0].text
    row = await app.call("sessions_get", {"session_id": done["session_id"]})
    assert row["status"] == "completed"


async def test_every_status_a_row_can_have_is_listed_by_the_tool(make_app, llm_script):
    from butlers.stores.sessions import SESSION_STATUSES

    app = await make_app()
    tools = {t.name: t for t in await app.client.list_tools()}
    status = tools["sessions_list"].input_schema["properties"]["status"]
    listed = next(option["enum"] for option in status["anyOf"] if "enum" in option)
    assert tuple(listed) == SESSION_STATUSES
    check = await app.context.pool.fetchval(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conname = 'sessions_status_check' AND connamespace = $1::regnamespace",
        app.context.schema,
    )
    assert all(f"'{s}'" in check for s in SESSION_STATUSES), check
