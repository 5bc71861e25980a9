"""A message whose target stays down fails after the retry budget, and the owner is told.

The owner writes on Telegram while FAILING_TARGET is down (killed and kept down: its
process is gone, or its pod's Service has no ready endpoint). The switchboard asks it
again with back-off under the route's key for its budget (the roster copy gives it
FAILING_BUDGET s through `routeRetrySecondsByButler`, the default being 120 s), then the
route fails `target_unavailable` with the last reason, the message ends `failed`, and one
reply saying so comes back on the same thread through the messenger's delivery log.
Everything is read through what every backend has: the Bot API stand-in, the butlers'
MCP tools and their database rows.
"""

from __future__ import annotations

import re

from butlers.testing.script_server import Script
from tests.support.telegram_api import TelegramApi

from .harness.ecosystem import EcosystemHandle
from .harness.telegram import FAILING_BUDGET, FAILING_TARGET, OWNER
from .test_busy_target import _route_retries
from .test_conversation_loop import _inbox_row
from .test_crash_recovery import _defer_model_jobs, _fetch, _target_sessions, _until
from .test_switchboard_flow import classify_as

DEADLINE = 60.0  # far past the budget: a route asked again for ever turns this red
SLACK_MS = 5000  # the last attempt's own time, past the budget's last wait


async def test_a_message_for_a_target_that_stays_down_fails_and_the_owner_is_told(
    butler_ecosystem: EcosystemHandle, llm_script: Script, telegram_stand_in: TelegramApi
) -> None:
    eco, bot = butler_ecosystem, telegram_stand_in
    text = "Remind me to call Aunt Ilse about the failing-target test"
    prompt = "Note: call Aunt Ilse (failing-target test)"
    llm_script.route("switchboard", classify_as((FAILING_TARGET, prompt, text)), when=text)
    retries_before = await _route_retries(eco)
    await _defer_model_jobs(eco, FAILING_TARGET)  # nothing falls due when it starts again
    await eco.kill(FAILING_TARGET)
    try:
        message = bot.says(text, user_id=OWNER)["message"]
        [reply] = await _until(
            "the failure reply on the thread",
            lambda: bot.replies_to(message["message_id"]),
            DEADLINE,
        )
        row = await _until("the reply recorded", lambda: _reply_sent(eco, text))
    finally:
        await eco.restart(FAILING_TARGET)

    # The route: asked again under its key until the budget ran out, then failed.
    switchboard = await eco.pool("switchboard")
    [route] = await _fetch(
        switchboard,
        "SELECT butler, status, error, duration_ms FROM routing_log WHERE request_id = $1::uuid",
        row["request_id"],
    )
    assert (route["butler"], route["status"]) == (FAILING_TARGET, "target_unavailable"), route
    gave_up = re.search(r"\(gave up after (\d+) attempts in ([\d.]+) s\)$", route["error"])
    assert gave_up, route["error"]
    attempts = int(gave_up[1])
    assert float(gave_up[2]) == FAILING_BUDGET
    # Back-off 0.5 s, 1 s, 2 s…: within 4 s at least the first two waits fit.
    assert attempts >= 3, route
    assert 1500 <= route["duration_ms"] <= FAILING_BUDGET * 1000 + SLACK_MS, route
    assert await _route_retries(eco) >= retries_before + attempts - 1

    # The message: failed, its one reply sent on the owner's thread, naming the reason.
    assert (row["status"], row["reply_state"]) == ("failed", "sent")
    assert reply["chat"]["id"] == OWNER
    assert reply["text"].startswith(f"{FAILING_TARGET} could not be reached: "), reply["text"]
    assert gave_up[0] in reply["text"]
    messenger = await eco.pool("messenger")
    delivery = await messenger.fetchrow(
        "SELECT channel, status, thread, provider_message_id FROM deliveries WHERE id = $1::uuid",
        row["reply_delivery_id"],
    )
    assert dict(delivery) == {
        "channel": "telegram",
        "status": "sent",
        "thread": {"chat_id": OWNER, "message_id": message["message_id"]},
        "provider_message_id": str(reply["message_id"]),
    }

    # Once back, the target runs nothing for the failed message, and no second reply came.
    assert await _target_sessions(eco, FAILING_TARGET, row["request_id"]) == []
    assert len(bot.replies_to(message["message_id"])) == 1
    fanouts = await _fetch(
        switchboard,
        "SELECT status, target_count, success_count FROM fanout_execution_log "
        "WHERE request_id = $1::uuid",
        row["request_id"],
    )
    assert fanouts == [{"status": "failed", "target_count": 1, "success_count": 0}]


async def _reply_sent(eco: EcosystemHandle, text: str) -> dict | None:
    row = await _inbox_row(eco, OWNER, text)
    return row if row and row["reply_state"] in ("sent", "failed") else None
