"""The switchboard pipeline end to end: ingest → classify → dispatch → target session → rows.

The model is scripted: the switchboard's classification session answers with a JSON
array, each target's session calls its domain tool and answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from .harness.ecosystem import EcosystemHandle
from .harness.golden import flow_golden
from .harness.normalize import VOLATILE_KEYS, Normalizer, sort_rows


def classify_as(*entries: tuple[str, str, str]) -> dict[str, Any]:
    """The switchboard model's answer: one {butler, prompt, segment} per entry."""
    return step(json.dumps([{"butler": b, "prompt": p, "segment": s} for b, p, s in entries]))


async def ingest(
    handle: EcosystemHandle, text: str, *, key: str | None = None, **options: Any
) -> dict[str, Any]:
    envelope = build_envelope(text, channel="telegram", provider="telegram", idempotency_key=key)
    return await handle.call(
        "switchboard",
        "ingest_v1",
        {"envelope": envelope.model_dump(mode="json"), "wait": True, **options},
    )


async def switchboard_rows(handle: EcosystemHandle, sql: str, *args: Any) -> list[dict[str, Any]]:
    pool = await handle.pool("switchboard")
    return [dict(r) for r in await pool.fetch(sql, *args)]


# -- registry ----------------------------------------------------------------------


async def test_every_butler_is_registered_and_alive(butler_ecosystem: EcosystemHandle) -> None:
    rows = await butler_ecosystem.call("switchboard", "butler_registry_list")
    registry = {r["name"]: r for r in rows}
    assert set(registry) == set(butler_ecosystem.names)
    for name, row in registry.items():
        assert row["url"] == butler_ecosystem[name].registered_url
        assert row["alive"] is True
    assert "health" in registry["health"]["modules"]


async def test_heartbeats_keep_last_seen_moving(butler_ecosystem: EcosystemHandle) -> None:
    async def last_seen() -> str:
        rows = await butler_ecosystem.call("switchboard", "butler_registry_list")
        return next(r["last_seen_at"] for r in rows if r["name"] == "general")

    first = await last_seen()

    async def moved() -> bool:
        return await last_seen() != first

    await wait_until(
        moved, timeout=10, interval=0.1, message="no heartbeat within 10 s (interval is 1 s)"
    )


# -- single and multi-domain flows ----------------------------------------------------


async def test_health_message_is_routed_and_logged(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    text = "Log my weight: 80.6kg"  # 80.6 kg is written by no other test
    llm_script.route("switchboard", classify_as(("health", "Log the user's weight: 80.6 kg", text)))
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=80.6, unit="kg")]),
        step("Logged 80.6 kg."),
    )
    result = await ingest(butler_ecosystem, text)
    assert result["status"] == "accepted" and result["duplicate"] is False
    assert result["fanout_status"] == "completed"
    [route] = result["routes"]
    assert (route["butler"], route["status"], route["tool_calls"]) == (
        "health",
        "success",
        ["measurement_log"],
    )
    [log_row] = await switchboard_rows(
        butler_ecosystem,
        "SELECT butler, status, session_id::text AS session_id FROM routing_log "
        "WHERE request_id = $1::uuid",
        result["request_id"],
    )
    assert log_row == {"butler": "health", "status": "success", "session_id": route["session_id"]}
    [inbox] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status, text FROM message_inbox WHERE request_id = $1::uuid",
        result["request_id"],
    )
    assert inbox == {"status": "dispatched", "text": text}
    health = await butler_ecosystem.pool("health")
    session = await health.fetchrow(
        "SELECT status, trigger_source, tool_calls, created_at, completed_at FROM sessions "
        "WHERE session_id = $1::uuid",
        route["session_id"],
    )
    assert session["status"] == "completed"
    assert session["trigger_source"] == f"switchboard:{result['request_id']}"
    # The tool ran and succeeded in this session, and its row is the one it returned.
    [tool_call] = session["tool_calls"]
    assert (tool_call["name"], tool_call["is_error"]) == ("measurement_log", False)
    measurement = await health.fetchrow(
        "SELECT type, value, unit, created_at FROM measurements WHERE id = $1::uuid",
        tool_call["result"]["id"],
    )
    assert measurement is not None, f"no measurement row {tool_call['result']['id']}"
    assert (measurement["type"], measurement["value"], measurement["unit"]) == (
        "weight",
        80.6,
        "kg",
    )
    assert session["created_at"] <= measurement["created_at"] <= session["completed_at"]


async def test_compound_message_is_decomposed_into_self_contained_prompts(
    butler_ecosystem: EcosystemHandle, llm_script: Script, update_golden: bool
) -> None:
    """Each target's session gets its own part as its prompt (not the whole message, not
    the other part) and writes its own rows: both sides are checked in their schemas."""
    text = "I saw Dr. Okafor today and need to send her a thank-you card"
    parts = {
        "health": ("Record a doctor visit with Dr. Okafor today", "I saw Dr. Okafor today"),
        "relationship": (
            "Add Dr. Okafor as a contact; a thank-you card is due",
            "need to send her a thank-you card",
        ),
    }
    llm_script.route(
        "switchboard", classify_as(*((b, prompt, seg) for b, (prompt, seg) in parts.items()))
    )
    llm_script.route(
        "health",
        step(
            tool_calls=[
                {
                    "name": "symptom_log",
                    "arguments": {"name": "doctor visit", "notes": "Dr. Okafor"},
                }
            ]
        ),
        step("Recorded the visit."),
    )
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_add", "arguments": {"name": "Dr. Okafor"}}]),
        step("Added Dr. Okafor; remember the card."),
    )
    result = await ingest(butler_ecosystem, text)
    assert {r["butler"]: r["status"] for r in result["routes"]} == {
        "health": "success",
        "relationship": "success",
    }
    [fanout] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status, target_count, success_count FROM fanout_execution_log "
        "WHERE request_id = $1::uuid",
        result["request_id"],
    )
    assert fanout == {"status": "completed", "target_count": 2, "success_count": 2}

    rows = {}
    for route in result["routes"]:
        butler = route["butler"]
        pool = await butler_ecosystem.pool(butler)
        session = await pool.fetchrow(
            "SELECT prompt, trigger_source, tool_calls FROM sessions WHERE session_id = $1::uuid",
            route["session_id"],
        )
        # The target's session was given its own part of the message, and only that.
        assert session["prompt"] == parts[butler][0]
        assert session["trigger_source"] == f"switchboard:{result['request_id']}"
        [asked, *_] = llm_script.requests_for(butler)
        first_user = next(m for m in asked["messages"] if m["role"] == "user")
        assert parts[butler][0] in first_user["content"]
        other = next(b for b in parts if b != butler)
        assert parts[other][0] not in json.dumps(asked["messages"])
        [tool_call] = session["tool_calls"]
        assert tool_call["is_error"] is False, tool_call
        rows[butler] = tool_call["result"]["id"]
    health = await butler_ecosystem.pool("health")
    visit = await health.fetchrow(
        "SELECT name, notes FROM symptoms WHERE id = $1::uuid", rows["health"]
    )
    assert dict(visit) == {"name": "doctor_visit", "notes": "Dr. Okafor"}
    relationship = await butler_ecosystem.pool("relationship")
    contact = await relationship.fetchval(
        "SELECT name FROM contacts WHERE id = $1::uuid", rows["relationship"]
    )
    assert contact == "Dr. Okafor"
    problems = await _switchboard_flow_golden(butler_ecosystem, result, update=update_golden)
    assert not problems, "\n\n".join(problems)


async def _switchboard_flow_golden(
    handle: EcosystemHandle, answer: dict[str, Any], *, update: bool
) -> list[str]:
    """The compound message's answer, switchboard rows and target sessions, golden."""
    request_id = answer["request_id"]
    normalizer = Normalizer(volatile_keys={**VOLATILE_KEYS, "idempotency_key": "{IDEMPOTENCY_KEY}"})
    normalizer.register(request_id, "REQUEST_ID")
    for route in answer["routes"]:
        normalizer.register(route["route_id"], "ROUTE_ID")
        normalizer.register(route["session_id"], "SESSION_ID")
    switchboard: dict[str, Any] = {}
    for table in ("message_inbox", "routing_log", "fanout_execution_log"):
        switchboard[table] = sort_rows(
            await switchboard_rows(
                handle, f"SELECT * FROM {table} WHERE request_id = $1::uuid", request_id
            )
        )
    sessions = []
    for route in answer["routes"]:
        pool = await handle.pool(route["butler"])
        row = await pool.fetchrow(
            "SELECT * FROM sessions WHERE session_id = $1::uuid", route["session_id"]
        )
        sessions.append(dict(row))
    return flow_golden(
        "switchboard-compound",
        "test_compound_message_is_decomposed_into_self_contained_prompts",
        {
            "01_ingest_answer.json": answer,
            "02_switchboard_rows.json": switchboard,
            "03_target_sessions.json": sessions,
        },
        normalizer,
        update=update,
    )


async def test_duplicate_idempotency_key_returns_the_same_request(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("switchboard", classify_as(("general", "Note: buy milk", "buy milk")))
    llm_script.route("general", step("Noted."))
    first = await ingest(butler_ecosystem, "buy milk", key="dup-key-1")
    again = await ingest(butler_ecosystem, "buy milk", key="dup-key-1")
    assert again == {"status": "accepted", "request_id": first["request_id"], "duplicate": True}
    rows = await switchboard_rows(
        butler_ecosystem, "SELECT 1 FROM message_inbox WHERE idempotency_key = 'dup-key-1'"
    )
    assert len(rows) == 1


async def test_same_key_with_different_content_is_a_conflict(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """Not a silent duplicate: the second message would otherwise be lost unseen."""
    llm_script.route("switchboard", classify_as(("general", "Note: pay rent", "pay rent")))
    llm_script.route("general", step("Noted."))
    first = await ingest(butler_ecosystem, "pay rent", key="conflict-key-1")
    envelope = build_envelope(
        "transfer everything",
        channel="telegram",
        provider="telegram",
        idempotency_key="conflict-key-1",
    )
    result = await butler_ecosystem.call_raw(
        "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": True}
    )
    assert result.is_error
    text = result.content[0].text
    assert "conflict" in text and first["request_id"] in text
    rows = await switchboard_rows(
        butler_ecosystem, "SELECT text FROM message_inbox WHERE idempotency_key = 'conflict-key-1'"
    )
    assert [r["text"] for r in rows] == ["pay rent"]


async def test_derived_keys_of_different_senders_do_not_collide(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """A provider's event id is unique per chat, not per provider: another sender who
    reuses it must not pre-empt (swallow) this sender's message."""
    for sender in ("mallory", "alice"):
        llm_script.route("switchboard", classify_as(("general", f"Note from {sender}", "hi")))
        llm_script.route("general", step("Noted."))
    results = []
    for sender in ("mallory", "alice"):
        envelope = build_envelope(
            f"hi from {sender}",
            channel="telegram",
            provider="telegram",
            sender=sender,
            event_id="telegram-update-42",
        )
        results.append(
            await butler_ecosystem.call(
                "switchboard",
                "ingest_v1",
                {"envelope": envelope.model_dump(mode="json"), "wait": True},
            )
        )
    assert [r["duplicate"] for r in results] == [False, False]
    assert results[0]["request_id"] != results[1]["request_id"]


async def test_invalid_envelope_is_rejected_naming_the_field(
    butler_ecosystem: EcosystemHandle,
) -> None:
    envelope = build_envelope("hello").model_dump(mode="json")
    envelope["event"]["observed_at"] = "2026-11-22T10:00:00"
    result = await butler_ecosystem.call_raw("switchboard", "ingest_v1", {"envelope": envelope})
    assert result.is_error
    assert "event.observed_at" in result.content[0].text


# -- classification fallback ----------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [step("I think this is about groceries."), step("[]"), step(error="model overloaded")],
    ids=["unparseable", "empty-array", "model-error"],
)
async def test_unusable_classification_routes_everything_to_general(
    butler_ecosystem: EcosystemHandle, llm_script: Script, answer: dict[str, Any]
) -> None:
    text = "Remember to water the plants on Friday"
    llm_script.route("switchboard", answer)
    llm_script.route("general", step("Noted."))
    result = await ingest(butler_ecosystem, text)
    assert result["classification"]["fallback"] is True
    [route] = result["routes"]
    assert (route["butler"], route["prompt"], route["status"]) == ("general", text, "success")


async def test_classification_timeout_falls_back_to_general(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    text = "What's on my list?"
    llm_script.route("switchboard", step("[]", delay=3.0))
    llm_script.route("general", step("Nothing yet."))
    result = await ingest(butler_ecosystem, text, classification_timeout_seconds=0.5)
    assert result["classification"]["fallback"] is True
    assert "timeout" in result["classification"]["reason"]
    assert result["routes"][0]["butler"] == "general"
    await _switchboard_idle(butler_ecosystem)


async def test_unknown_butler_in_classification_is_skipped(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "switchboard",
        classify_as(("astrology", "Read my stars", "stars"), ("general", "Note: stars", "stars")),
    )
    llm_script.route("general", step("Noted."))
    result = await ingest(butler_ecosystem, "Read my stars")
    assert [r["butler"] for r in result["routes"]] == ["general"]
    assert "unknown butler 'astrology'" in result["classification"]["reason"]


# -- resilience ----------------------------------------------------------------------------


async def test_route_timeout_is_logged_and_other_targets_continue(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "switchboard",
        classify_as(("general", "Slow note", "slow"), ("health", "Log weight 81 kg", "81kg")),
    )
    llm_script.route("general", step("Slow answer.", delay=3.0))
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=81, unit="kg")]),
        step("Logged."),
    )
    result = await ingest(butler_ecosystem, "slow note, and 81kg", route_timeout_seconds=1.5)
    statuses = {r["butler"]: r["status"] for r in result["routes"]}
    assert statuses == {"general": "timeout", "health": "success"}
    assert result["fanout_status"] == "partial"
    [row] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status, error FROM routing_log WHERE request_id = $1::uuid AND butler = 'general'",
        result["request_id"],
    )
    assert row["status"] == "timeout" and "1.5 s" in row["error"]
    # The route's session belongs to `general` (keyed by the route id, issue 10): the
    # switchboard stopping to wait neither kills it nor lets a retry run it twice. It runs
    # to its end, once, and its outcome is recorded for whoever asks again.
    general = await butler_ecosystem.pool("general")
    source = f"switchboard:{result['request_id']}"

    async def finished() -> Any:
        row = await general.fetchrow(
            "SELECT status, error, output, duration_ms FROM sessions WHERE trigger_source = $1",
            source,
        )
        return row if row is not None and row["status"] != "running" else None

    session = await wait_until(
        finished, timeout=15, message="general's abandoned session is still running"
    )
    assert (session["status"], session["error"], session["output"]) == (
        "completed",
        None,
        "Slow answer.",
    )
    assert session["duration_ms"] >= 3000, "the session was cut short"
    assert (
        await general.fetchval("SELECT count(*) FROM sessions WHERE trigger_source = $1", source)
        == 1
    )


async def test_a_killed_butler_is_waited_for_while_the_others_go_ahead(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """The route to a killed butler is asked again (same route key) until it is back,
    within the switchboard's retry budget; the other route does not wait for it."""
    await butler_ecosystem.kill("relationship")
    try:
        llm_script.route(
            "switchboard",
            classify_as(
                ("relationship", "Add Tom as a contact", "add Tom"),
                ("health", "Log weight 79 kg", "79kg"),
            ),
        )
        llm_script.route(
            "health",
            step(tool_calls=[call("measurement_log", type="weight", value=79, unit="kg")]),
            step("Logged."),
        )
        llm_script.route(
            "relationship",
            step(tool_calls=[{"name": "contact_add", "arguments": {"name": "Tom"}}]),
            step("Added Tom."),
        )
        pending = asyncio.create_task(ingest(butler_ecosystem, "add Tom, and 79kg"))

        async def health_done() -> bool:
            rows = await switchboard_rows(
                butler_ecosystem,
                "SELECT status FROM routing_log WHERE butler = 'health' "
                "AND created_at > clock_timestamp() - interval '30 seconds'",
            )
            return any(r["status"] == "success" for r in rows)

        await wait_until(health_done, timeout=30, message="health waited for relationship")
        assert not pending.done()
    finally:
        await butler_ecosystem.restart("relationship")
    result = await asyncio.wait_for(pending, 60)
    statuses = {r["butler"]: r["status"] for r in result["routes"]}
    assert statuses == {"relationship": "success", "health": "success"}
    assert result["fanout_status"] == "completed"


async def test_mcp_client_is_cached_and_replaced_after_a_restart(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    async def route_to_general() -> dict[str, Any]:
        llm_script.route("general", step("ok"))
        return await butler_ecosystem.call(
            "switchboard", "route", {"butler": "general", "prompt": "ping"}
        )

    await route_to_general()
    before = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert (await route_to_general())["status"] == "success"
    cached = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert cached["mcp_clients_opened"] == before["mcp_clients_opened"]

    # A restarted butler forgot the MCP session (it answers 404, so it never saw the call):
    # the next route opens one new session in its place, and the route after reuses it.
    await butler_ecosystem.restart("general")
    assert (await route_to_general())["status"] == "success"
    after = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert after["mcp_clients_opened"] == before["mcp_clients_opened"] + 1
    assert after["mcp_clients_cached"] == cached["mcp_clients_cached"]
    assert (await route_to_general())["status"] == "success"
    again = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert again["mcp_clients_opened"] == after["mcp_clients_opened"]


async def test_switchboard_only_tools_are_absent_elsewhere(
    butler_ecosystem: EcosystemHandle,
) -> None:
    for name in butler_ecosystem.names:
        async with butler_ecosystem.client(name) as client:
            tools = {t.name for t in await client.list_tools()}
        has = {"ingest_v1", "classify_message", "route"} & tools
        expected = {"ingest_v1", "classify_message", "route"} if name == "switchboard" else set()
        assert has == expected, f"{name} serves {sorted(has)}"


async def _sessions_done(handle: EcosystemHandle, butler: str, timeout: float = 15) -> None:
    """Until no session of `butler` is still running (a timed-out route's session goes on)."""
    pool = await handle.pool(butler)

    async def none_running() -> bool:
        return not await pool.fetchval("SELECT count(*) FROM sessions WHERE status = 'running'")

    await wait_until(
        none_running, timeout=timeout, interval=0.1, message=f"{butler} still has running sessions"
    )


async def _switchboard_idle(handle: EcosystemHandle) -> None:
    await _sessions_done(handle, "switchboard")


async def test_stale_client_after_a_kill_is_replaced_on_the_next_route(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("general", step("ok"))
    await butler_ecosystem.call("switchboard", "route", {"butler": "general", "prompt": "a"})
    before = await butler_ecosystem.call("switchboard", "switchboard_stats")
    await butler_ecosystem.kill("general")
    try:
        down = await butler_ecosystem.call(
            "switchboard", "route", {"butler": "general", "prompt": "b"}
        )
        assert down["status"] == "target_unavailable"
    finally:
        await butler_ecosystem.restart("general")
    llm_script.route("general", step("ok again"), step("ok once more"))
    up = await butler_ecosystem.call("switchboard", "route", {"butler": "general", "prompt": "c"})
    assert up["status"] == "success"
    # The dead client was replaced by a new one, which is cached in its place.
    replaced = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert replaced["mcp_clients_opened"] > before["mcp_clients_opened"]
    assert replaced["mcp_clients_cached"] == before["mcp_clients_cached"]
    await butler_ecosystem.call("switchboard", "route", {"butler": "general", "prompt": "d"})
    again = await butler_ecosystem.call("switchboard", "switchboard_stats")
    assert again["mcp_clients_opened"] == replaced["mcp_clients_opened"]


async def test_ingest_without_wait_accepts_at_once_and_routes_in_the_background(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("switchboard", classify_as(("general", "Note: call mum", "call mum")))
    llm_script.route("general", step("Noted."))
    envelope = build_envelope("call mum", channel="telegram", provider="telegram")
    accepted = await butler_ecosystem.call(
        "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json")}
    )
    assert set(accepted) == {"status", "request_id", "duplicate"}
    message: dict = {}

    async def dispatched() -> bool:
        message.update(
            await butler_ecosystem.call(
                "switchboard", "message_get", {"request_id": accepted["request_id"]}
            )
        )
        return bool(message["status"] == "dispatched")

    await wait_until(
        dispatched, timeout=15, interval=0.1, message=lambda: f"still {message['status']}"
    )
    assert [(r["butler"], r["status"]) for r in message["routes"]] == [("general", "success")]
