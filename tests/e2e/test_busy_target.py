"""A channel message for a busy butler is not lost: the switchboard asks again.

The owner writes on Telegram while the target's session queue is full (the roster
copy caps BUSY_TARGET's queue at BUSY_QUEUE, `spec.runtime.maxQueuedSessions`, so a
few held sessions fill it on every backend): the target answers "busy" at once, the
switchboard asks again with back-off under the route's key, and once the queue drains
the route runs exactly once and the answer comes back on the thread. Everything is
read through what every backend has: the Bot API stand-in, the butlers' MCP tools and
their database rows.
"""

from __future__ import annotations

import asyncio
from typing import Any

from butlers.testing.script_server import Script, call, step
from tests.support.telegram_api import TelegramApi

from .harness.ecosystem import EcosystemHandle
from .harness.telegram import BUSY_QUEUE, BUSY_TARGET, OWNER
from .test_conversation_loop import _inbox_row, _replied
from .test_crash_recovery import _until
from .test_switchboard_flow import classify_as

DEADLINE = 60.0
HOLD = "busy-target-filler"
RETRIES_SEEN = 2  # "busy" answers the test waits for while the queue is full


async def _queue(eco: EcosystemHandle) -> dict[str, Any]:
    """The target's session activity: {running, queued} (queued: waiting their turn)."""
    return dict((await eco.call(BUSY_TARGET, "status"))["sessions"])


async def _route_retries(eco: EcosystemHandle) -> int:
    return int((await eco.call("switchboard", "switchboard_stats"))["route_retries"])


async def test_a_message_for_a_busy_target_is_asked_again_and_answered_once(
    butler_ecosystem: EcosystemHandle, llm_script: Script, telegram_stand_in: TelegramApi
) -> None:
    eco, bot = butler_ecosystem, telegram_stand_in
    text = "Log my weight: 81.7kg"  # 81.7 kg is written by no other test
    prompt = "Log the user's weight: 81.7 kg (busy target)"
    fillers = [f"Busy filler {i} of the queue" for i in range(BUSY_QUEUE)]
    llm_script.route("switchboard", classify_as((BUSY_TARGET, prompt, text)), when=text)
    llm_script.route(BUSY_TARGET, step("Filler done.", hold=HOLD), when=fillers[0])
    for filler in fillers[1:]:
        llm_script.route(BUSY_TARGET, step("Filler done."), when=filler)
    llm_script.route(
        BUSY_TARGET,
        step(tool_calls=[call("measurement_log", type="weight", value=81.7, unit="kg")]),
        step("Logged 81.7 kg."),
        when=prompt,
    )
    retries_before = await _route_retries(eco)

    def trigger(filler: str) -> asyncio.Task[Any]:
        arguments = {"prompt": filler, "trigger_source": "e2e-busy-filler"}
        return asyncio.create_task(eco.call(BUSY_TARGET, "trigger", arguments))

    # The queue filled in order: one session held at the model, the rest waiting.
    tasks = [trigger(fillers[0])]
    try:
        await _until("the first filler at the model", lambda: llm_script.held(HOLD) == 1)
        tasks += [trigger(filler) for filler in fillers[1:]]

        async def full() -> bool:
            return (await _queue(eco))["queued"] == BUSY_QUEUE - 1

        await _until(f"{BUSY_TARGET}'s queue full", full)
        message = bot.says(text, user_id=OWNER)["message"]

        async def asked_again() -> bool:
            return await _route_retries(eco) >= retries_before + RETRIES_SEEN

        await _until(f"the route asked again {RETRIES_SEEN} times", asked_again, DEADLINE)
        row = await _inbox_row(eco, OWNER, text)
        assert row is not None and row["status"] == "classified", row  # open, not failed
        switchboard = await eco.pool("switchboard")
        logged = await switchboard.fetchval(
            "SELECT count(*) FROM routing_log WHERE request_id = $1::uuid", row["request_id"]
        )
        assert (logged, bot.replies_to(message["message_id"])) == (0, [])
        assert (await _queue(eco))["queued"] == BUSY_QUEUE - 1, "still full while asked"
    finally:
        llm_script.release(HOLD)
    for result in await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE):
        assert result["success"], result

    [reply] = await _until(
        "the reply on the thread", lambda: bot.replies_to(message["message_id"]), DEADLINE
    )
    assert (reply["chat"]["id"], reply["text"]) == (OWNER, "Logged 81.7 kg.")
    row = await _until("the reply recorded", lambda: _replied(eco, OWNER, text))
    assert row["status"] == "dispatched"
    routes = await switchboard.fetch(
        "SELECT butler, status, session_id::text AS session_id FROM routing_log "
        "WHERE request_id = $1::uuid",
        row["request_id"],
    )
    target = await eco.pool(BUSY_TARGET)
    sessions = await target.fetch(
        "SELECT session_id::text AS session_id, status FROM sessions WHERE trigger_source = $1",
        f"switchboard:{row['request_id']}",
    )
    assert [dict(s) for s in sessions] == [
        {"session_id": routes[0]["session_id"], "status": "completed"}
    ], "the route ran once, however often it was asked"
    assert [(r["butler"], r["status"]) for r in routes] == [(BUSY_TARGET, "success")]
    written = await target.fetchval("SELECT count(*) FROM measurements WHERE value::text = '81.7'")
    assert written == 1
