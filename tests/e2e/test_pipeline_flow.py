"""The whole pipeline under load and faults (documents 000 and 001): several messages in
flight at once with no cross-talk, a target's model failing, a target killed while it
is working on a request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from .harness.ecosystem import EcosystemHandle
from .test_switchboard_flow import classify_as, ingest, switchboard_rows

# Three messages, three butlers; each message's marker appears in nothing else.
IN_FLIGHT = {
    "health": {
        "text": "Log my weight: 77.3kg",
        "prompt": "Log the user's weight: 77.3 kg",
        "call": call("measurement_log", type="weight", value=77.3, unit="kg"),
        "marker": "77.3",
    },
    "relationship": {
        "text": "Add Ingrid Halvorsen as a contact",
        "prompt": "Add the contact Ingrid Halvorsen",
        "call": {"name": "contact_add", "arguments": {"name": "Ingrid Halvorsen"}},
        "marker": "Halvorsen",
    },
    "general": {
        "text": "Note: pick up the cello on Saturday",
        "prompt": "File a note: pick up the cello on Saturday",
        "call": call("note_add", title="Pick up the cello", body="Saturday", collection="errands"),
        "marker": "cello",
    },
}


async def _session(handle: EcosystemHandle, butler: str, session_id: str) -> dict[str, Any]:
    pool = await handle.pool(butler)
    row = await pool.fetchrow("SELECT * FROM sessions WHERE session_id = $1::uuid", session_id)
    assert row is not None, f"no session {session_id} on {butler}"
    return dict(row)


async def test_messages_in_flight_at_once_do_not_cross_talk(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """Three messages for three butlers are all mid-session at the same moment (each
    target's model request is held until all three are waiting); each ends with its own
    route, session, rows and classification, and no marker of another message."""
    for butler, m in IN_FLIGHT.items():
        llm_script.route(
            "switchboard", classify_as((butler, m["prompt"], m["text"])), when=m["text"]
        )
        llm_script.route(
            butler,
            step(tool_calls=[m["call"]], hold="all-in-flight"),
            step(f"Done: {m['marker']}."),
            when=m["prompt"],
        )
    messages = {
        butler: asyncio.create_task(ingest(butler_ecosystem, m["text"]))
        for butler, m in IN_FLIGHT.items()
    }
    try:
        await wait_until(
            lambda: llm_script.held("all-in-flight") == len(IN_FLIGHT),
            timeout=45,
            message=lambda: f"{llm_script.held('all-in-flight')} of 3 sessions in flight",
        )
    finally:
        llm_script.release("all-in-flight")
    answers = {butler: await asyncio.wait_for(task, 60) for butler, task in messages.items()}

    for butler, answer in answers.items():
        mine = IN_FLIGHT[butler]
        others = [m["marker"] for b, m in IN_FLIGHT.items() if b != butler]
        [route] = answer["routes"]
        assert (route["butler"], route["status"]) == (butler, "success"), route
        [logged] = await switchboard_rows(
            butler_ecosystem,
            "SELECT butler, status, session_id::text AS session_id FROM routing_log "
            "WHERE request_id = $1::uuid",
            answer["request_id"],
        )
        assert logged == {"butler": butler, "status": "success", "session_id": route["session_id"]}
        [inbox] = await switchboard_rows(
            butler_ecosystem,
            "SELECT text, status FROM message_inbox WHERE request_id = $1::uuid",
            answer["request_id"],
        )
        assert inbox == {"text": mine["text"], "status": "dispatched"}
        [classified] = await switchboard_rows(
            butler_ecosystem,
            "SELECT prompt, output FROM sessions WHERE trigger_source = $1",
            f"classify:{answer['request_id']}",
        )
        session = await _session(butler_ecosystem, butler, route["session_id"])
        assert session["trigger_source"] == f"switchboard:{answer['request_id']}"
        assert session["prompt"] == mine["prompt"]
        assert session["output"] == f"Done: {mine['marker']}."
        [tool_call] = session["tool_calls"]
        assert tool_call["is_error"] is False, tool_call
        asked = [r for r in llm_script.requests if r.get("session_id") == route["session_id"]]
        assert len(asked) == 2, f"{butler}'s session made {len(asked)} model requests"
        seen = json.dumps([classified, session, asked], default=str)
        assert mine["marker"] in seen
        for marker in others:
            assert marker not in seen, f"{butler}'s message saw {marker!r}"


async def test_target_model_error_is_a_route_error_and_a_failed_message(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    text = "Log my resting heart rate: 58"
    llm_script.route("switchboard", classify_as(("health", "Log resting heart rate 58", text)))
    llm_script.route("health", step(error="model overloaded (529)"))
    answer = await ingest(butler_ecosystem, text)
    [route] = answer["routes"]
    assert (route["butler"], route["status"]) == ("health", "error")
    assert "model overloaded (529)" in route["error"]
    assert answer["fanout_status"] == "failed"
    [logged] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status, error FROM routing_log WHERE request_id = $1::uuid",
        answer["request_id"],
    )
    assert logged["status"] == "error" and "model overloaded (529)" in logged["error"]
    [inbox] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status FROM message_inbox WHERE request_id = $1::uuid",
        answer["request_id"],
    )
    assert inbox == {"status": "failed"}
    [fanout] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status, success_count, failures FROM fanout_execution_log "
        "WHERE request_id = $1::uuid",
        answer["request_id"],
    )
    assert (fanout["status"], fanout["success_count"]) == ("failed", 0)
    assert [f["butler"] for f in fanout["failures"]] == ["health"]
    health = await butler_ecosystem.pool("health")
    session = await health.fetchrow(
        "SELECT status, error FROM sessions WHERE trigger_source = $1",
        f"switchboard:{answer['request_id']}",
    )
    assert session["status"] == "error" and "model overloaded (529)" in session["error"]


async def _kill_relationship_mid_request(
    handle: EcosystemHandle, script: Script, text: str
) -> dict[str, Any]:
    """Send `text` (one part to `relationship`, one to `health`), SIGKILL `relationship`
    while its session waits for the model, restart it at once; the `ingest_v1` answer."""
    script.route(
        "switchboard",
        classify_as(
            ("relationship", "Add the contact Tomasz Wrona", "Add Tomasz Wrona"),
            ("health", "Log weight 76.1 kg", "log my weight 76.1kg"),
        ),
    )
    script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_add", "arguments": {"name": "Tomasz Wrona"}}]),
        step("Added.", hold="killed"),
    )
    script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=76.1, unit="kg")]),
        step("Logged."),
    )
    message = asyncio.create_task(ingest(handle, text, route_timeout_seconds=60))
    restarted = False
    try:
        await wait_until(
            lambda: script.held("killed") == 1,
            timeout=30,
            message="relationship's session never reached its second model request",
        )
        await handle.kill("relationship")
        # The held request's session died with its butler: the hold did its part, and its
        # own deadline must not run on through the restart (a new pod takes a while on kind).
        script.release("killed")
        # The switchboard asks the restarted butler again under the same route key; it
        # answers with the interrupted session (run once), well within the route timeout.
        await handle.restart("relationship")
        restarted = True
        return await asyncio.wait_for(message, 45)
    finally:
        script.release("killed")
        if not restarted:
            await handle.restart("relationship")


async def test_butler_killed_during_a_request_is_unavailable_and_others_unaffected(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """`relationship` is SIGKILLed while its session waits for the model and restarted:
    its route ends (error: the session was interrupted) well within the route timeout,
    `health` in the same message succeeds, and the next message to it goes through."""
    answer = await _kill_relationship_mid_request(
        butler_ecosystem, llm_script, "Add Tomasz Wrona, and log my weight 76.1kg"
    )
    routes = {r["butler"]: r for r in answer["routes"]}
    assert routes["relationship"]["status"] in ("target_unavailable", "error"), routes
    assert routes["health"]["status"] == "success", routes["health"]
    assert answer["fanout_status"] == "partial"
    [inbox] = await switchboard_rows(
        butler_ecosystem,
        "SELECT status FROM message_inbox WHERE request_id = $1::uuid",
        answer["request_id"],
    )
    assert inbox["status"] == "partial"
    llm_script.route("switchboard", classify_as(("relationship", "Add Tomasz", "add Tomasz")))
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_add", "arguments": {"name": "Tomasz Wrona"}}]),
        step("Added Tomasz."),
    )
    again = await ingest(butler_ecosystem, "add Tomasz")
    assert [(r["butler"], r["status"]) for r in again["routes"]] == [("relationship", "success")]


async def test_session_of_a_butler_killed_mid_request_does_not_stay_running(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    answer = await _kill_relationship_mid_request(
        butler_ecosystem, llm_script, "Add Tomasz Wrona again, and log my weight 76.1kg"
    )
    relationship = await butler_ecosystem.pool("relationship")
    source = f"switchboard:{answer['request_id']}"

    async def settled() -> dict[str, Any] | None:
        row = await relationship.fetchrow(
            "SELECT status, error FROM sessions WHERE trigger_source = $1", source
        )
        return dict(row) if row is not None and row["status"] != "running" else None

    ended = await wait_until(
        settled, timeout=15, message="the killed butler's session is still `running`"
    )
    assert ended["status"] != "completed" and ended["error"], ended
