"""Nothing lost, nothing stuck: connection loss and kill -9 at the worst moment.

Each test performs the fault against the running ecosystem (a proxy that drops the
switchboard's connection after `trigger` was sent; SIGKILL of the switchboard, of a
target, of a butler holding a call for approval) and asserts the rows it leaves:
every message ends dispatched or failed with a reason, every session ends, and no
target session runs twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, call, step
from tests.support.proxy import DroppingProxy

from .harness.ecosystem import EcosystemHandle
from .test_switchboard_flow import classify_as, ingest

DEADLINE = 30.0
OPEN = ("accepted", "classified")


async def _until(what: str, check: Callable[[], Any], timeout: float = DEADLINE) -> Any:
    """The first truthy value of `check()` (awaited when it is a coroutine)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        await asyncio.sleep(0.05)


async def _defer_model_jobs(eco: EcosystemHandle, butler: str) -> None:
    """Push the butler's memory consolidation a day ahead: a job found due when the killed
    butler starts again would ask the scripted model for a step this test does not give."""
    pool = await eco.pool(butler)
    await pool.execute(
        "UPDATE scheduled_tasks SET next_due_at = now() + interval '1 day' "
        "WHERE job_name = 'memory_consolidate'"
    )


async def _fetch(pool: asyncpg.Pool, sql: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in await pool.fetch(sql, *args)]


async def _ingest_in_background(handle: EcosystemHandle, text: str) -> str:
    envelope = build_envelope(text, channel="telegram", provider="telegram")
    accepted = await handle.call(
        "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json")}
    )
    return str(accepted["request_id"])


async def _message(handle: EcosystemHandle, request_id: str) -> dict[str, Any]:
    pool = await handle.pool("switchboard")
    [row] = await _fetch(
        pool,
        "SELECT status, attempts, error FROM message_inbox WHERE request_id = $1::uuid",
        request_id,
    )
    return row


async def _closed(handle: EcosystemHandle, request_id: str) -> str | None:
    """The message's status once it left `accepted`/`classified`, else None."""
    pool = await handle.pool("switchboard")
    status = await pool.fetchval(
        "SELECT status FROM message_inbox WHERE request_id = $1::uuid", request_id
    )
    return None if status in OPEN else str(status)


async def _target_sessions(handle: EcosystemHandle, butler: str, request_id: str) -> list[dict]:
    pool = await handle.pool(butler)
    return await _fetch(
        pool,
        "SELECT session_id::text AS session_id, status, error FROM sessions "
        "WHERE trigger_source = $1 ORDER BY created_at",
        f"switchboard:{request_id}",
    )


async def _measurements(handle: EcosystemHandle, value: float) -> int:
    pool = await handle.pool("health")
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM measurements WHERE value = $1::text::jsonb", str(value)
        )
    )


def _weight_session(value: float, answer_delay: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """A health session: log the weight, then answer after `answer_delay` seconds."""
    return (
        step(tool_calls=[call("measurement_log", type="weight", value=value, unit="kg")]),
        step(f"Logged {value} kg.", delay=answer_delay),
    )


# -- connection loss ------------------------------------------------------------------


async def test_a_dropped_connection_does_not_run_the_target_session_twice(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    health = butler_ecosystem["health"]
    target = urlsplit(health.url)
    proxy = DroppingProxy(target.hostname or "127.0.0.1", target.port or 80)
    # The proxy listens where the switchboard reaches this machine (on kind, the host's
    # address on kind's network, at the port its NetworkPolicy's extra egress rule allows).
    host, port = butler_ecosystem.host_listener
    proxied = f"http://{host}:{await proxy.start(host, port or 0)}{target.path}"
    switchboard = await butler_ecosystem.pool("switchboard")
    value, text = 83.7, "Log my weight: 83.7kg"

    async def weight_logged() -> None:
        await _until("the measurement is logged", lambda: _measurements(butler_ecosystem, value))

    # The switchboard reaches health through the proxy, which drops the connection once
    # `trigger` was sent and the session has done its work, before the answer.
    proxy.drop_after(b'"trigger"', weight_logged)
    llm_script.route("switchboard", classify_as(("health", "Log weight 83.7 kg", text)))
    llm_script.route("health", *_weight_session(value, answer_delay=1.0))
    await switchboard.execute("UPDATE butler_registry SET url = $1 WHERE name = 'health'", proxied)
    try:
        result = await ingest(butler_ecosystem, text)
    finally:
        await switchboard.execute(
            "UPDATE butler_registry SET url = $1 WHERE name = 'health'", health.registered_url
        )
        await proxy.aclose()
    assert proxy.dropped.is_set(), "the proxy never dropped the trigger call"
    [route] = result["routes"]
    assert route["status"] == "success", route
    sessions = await _target_sessions(butler_ecosystem, "health", result["request_id"])
    assert [(s["session_id"], s["status"]) for s in sessions] == [
        (route["session_id"], "completed")
    ]
    assert await _measurements(butler_ecosystem, value) == 1


# -- kill -9 ----------------------------------------------------------------------------


async def test_switchboard_killed_mid_dispatch_resumes_without_rerunning_the_target(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    value, text = 84.1, "Log my weight: 84.1kg"
    llm_script.route("switchboard", classify_as(("health", "Log weight 84.1 kg", text)))
    llm_script.route("health", *_weight_session(value, answer_delay=1.5))
    request_id = await _ingest_in_background(butler_ecosystem, text)
    await _until("health logs the weight", lambda: _measurements(butler_ecosystem, value))
    await butler_ecosystem.kill("switchboard")  # the route is in flight
    await butler_ecosystem.restart("switchboard")

    await _until("the message is closed", lambda: _closed(butler_ecosystem, request_id))
    message = await _message(butler_ecosystem, request_id)
    assert (message["status"], message["attempts"], message["error"]) == ("dispatched", 2, None)
    sessions = await _target_sessions(butler_ecosystem, "health", request_id)
    assert [s["status"] for s in sessions] == ["completed"], sessions
    switchboard = await butler_ecosystem.pool("switchboard")
    routes = await _fetch(
        switchboard,
        "SELECT butler, status, session_id::text AS session_id FROM routing_log "
        "WHERE request_id = $1::uuid",
        request_id,
    )
    assert routes == [
        {"butler": "health", "status": "success", "session_id": sessions[0]["session_id"]}
    ]
    fanouts = await _fetch(
        switchboard,
        "SELECT status, target_count, success_count FROM fanout_execution_log "
        "WHERE request_id = $1::uuid",
        request_id,
    )
    assert fanouts == [{"status": "completed", "target_count": 1, "success_count": 1}]
    assert await _measurements(butler_ecosystem, value) == 1


async def test_switchboard_killed_while_classifying_classifies_again_after_restart(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    text = "Note: buy stamps"
    llm_script.route(
        "switchboard",
        step("[]", delay=5.0),  # the answer the killed switchboard never reads
        classify_as(("general", "Note: buy stamps", text)),
    )
    llm_script.route("general", step("Noted."))
    request_id = await _ingest_in_background(butler_ecosystem, text)
    await _until("classification starts", lambda: llm_script.requests_for("switchboard"))
    await butler_ecosystem.kill("switchboard")
    await butler_ecosystem.restart("switchboard")

    await _until("the message is closed", lambda: _closed(butler_ecosystem, request_id))
    message = await _message(butler_ecosystem, request_id)
    assert (message["status"], message["attempts"]) == ("dispatched", 2)
    switchboard = await butler_ecosystem.pool("switchboard")
    classifications = await _fetch(
        switchboard,
        "SELECT status FROM sessions WHERE trigger_source = $1 ORDER BY created_at",
        f"classify:{request_id}",
    )
    assert [c["status"] for c in classifications] == ["interrupted", "completed"]
    sessions = await _target_sessions(butler_ecosystem, "general", request_id)
    assert [s["status"] for s in sessions] == ["completed"]


async def test_target_killed_mid_session_is_asked_again_and_the_message_ends_with_the_reason(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """The switchboard asks the restarted target again under the same route key: the
    target answers with the interrupted session (it ran once, its writes kept), and the
    message ends failed with that reason instead of being lost or run twice."""
    value, text = 85.2, "Log my weight: 85.2kg"
    llm_script.route("switchboard", classify_as(("health", "Log weight 85.2 kg", text)))
    llm_script.route("health", *_weight_session(value, answer_delay=5.0))
    request_id = await _ingest_in_background(butler_ecosystem, text)
    await _until("health asks for its answer", lambda: len(llm_script.requests_for("health")) == 2)
    await _defer_model_jobs(butler_ecosystem, "health")
    await butler_ecosystem.kill("health")
    await butler_ecosystem.restart("health")  # within the switchboard's retry budget
    status = await _until("the message is closed", lambda: _closed(butler_ecosystem, request_id))
    assert status == "failed"
    switchboard = await butler_ecosystem.pool("switchboard")
    [route] = await _fetch(
        switchboard,
        "SELECT status, error FROM routing_log WHERE request_id = $1::uuid",
        request_id,
    )
    assert route["status"] == "error" and "process stopped" in route["error"]
    [session] = await _target_sessions(butler_ecosystem, "health", request_id)
    assert session["status"] == "interrupted"
    assert "process stopped" in session["error"]


async def test_approval_held_by_a_killed_butler_expires_at_restart(
    butler_ecosystem: EcosystemHandle,
) -> None:
    contact = await butler_ecosystem.call("relationship", "contact_add", {"name": "Held Up"})
    contact_id = str(contact["id"])
    held = asyncio.create_task(
        butler_ecosystem.call("relationship", "contact_delete", {"contact_id": contact_id})
    )
    pool = await butler_ecosystem.pool("relationship")

    async def pending() -> Any:
        return await pool.fetchval(
            "SELECT id FROM approvals WHERE status = 'pending' AND tool_args->>'contact_id' = $1",
            contact_id,
        )

    approval_id: uuid.UUID = await _until("the call is held", pending, timeout=10)
    await _defer_model_jobs(butler_ecosystem, "relationship")
    await butler_ecosystem.kill("relationship")  # before the gate's own deadline
    with contextlib.suppress(Exception):
        await held
    await butler_ecosystem.restart("relationship")
    row = await pool.fetchrow(
        "SELECT status, decided_by, reason FROM approvals WHERE id = $1", approval_id
    )
    assert (row["status"], row["decided_by"]) == ("expired", "system")
    assert "restarted" in row["reason"]
    assert await pool.fetchval("SELECT count(*) FROM contacts WHERE id = $1::uuid", contact_id) == 1
