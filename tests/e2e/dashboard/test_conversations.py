"""The Conversations API: the owner writes from the dashboard (the `dashboard` channel,
through the switchboard) and the conversation shows the classification, the route, the
session it ran with its tool calls, and the answer; live events follow it; connector
health is on the overview, and a failing connector is an issue until it recovers."""

from __future__ import annotations

import uuid
from typing import Any

import httpx2 as httpx
import pytest

from butlers.testing.script_server import Script, call, step
from tests.support.telegram_api import TelegramApi

from ..harness.ecosystem import EcosystemHandle
from ..harness.telegram import OWNER, STRANGER
from ..test_crash_recovery import _until
from ..test_switchboard_flow import classify_as
from .conftest import sse

DEADLINE = 60.0


async def _conversation(
    dashboard: httpx.AsyncClient, request_id: str, **params: Any
) -> dict[str, Any] | None:
    listed = (await dashboard.get("/api/conversations", params=params)).json()["data"]
    return next((m for m in listed if m["request_id"] == request_id), None)


async def test_the_owner_writes_from_the_dashboard_and_the_answer_is_in_the_conversation(
    dashboard: httpx.AsyncClient, llm_script: Script
) -> None:
    marker = uuid.uuid4().hex[:8]
    text = f"Log my weight 77.7 kg ({marker})"
    llm_script.route("switchboard", classify_as(("health", f"Log 77.7 kg ({marker})", text)),
                     when=marker)  # fmt: skip
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=77.7, unit="kg")]),
        step(f"Logged 77.7 kg ({marker})."),
        when=marker,
    )
    async with sse(dashboard) as events:
        sent = await dashboard.post("/api/conversations/messages", json={"text": text})
        assert sent.status_code == 202, sent.text
        request_id = sent.json()["data"]["request_id"]

        async def answered() -> dict[str, Any] | None:
            found = await _conversation(dashboard, request_id, channel="dashboard")
            return found if found and found["reply"]["state"] == "sent" else None

        message = await _until("the answer on the page", answered, DEADLINE)
        done = await events.wait_for(
            lambda e: (
                e.type == "message_done"
                and e.data.get("request_id") == request_id
                and e.data.get("reply_state") == "sent"
            ),
            timeout=DEADLINE,
        )
    assert done.data["channel"] == "dashboard"
    assert (message["channel"], message["text"], message["status"]) == (
        "dashboard",
        text,
        "dispatched",
    )
    assert message["reply"]["text"] == f"Logged 77.7 kg ({marker})."
    [route] = message["routes"]
    assert (route["butler"], route["status"]) == ("health", "success")
    assert route["session_id"] and route["session_status"] == "completed"
    assert route["tool_calls"] == ["measurement_log"]
    assert message["fallback"] is False and message["quarantine_reason"] is None
    audit = (await dashboard.get("/api/audit-log", params={"butler": "switchboard"})).json()
    assert any(
        a["operation"] == "message.send" and a["target"] and a["status"] == "ok"
        for a in audit["data"]
    ), audit["data"][:3]


async def test_an_empty_or_oversized_message_is_refused_naming_the_field(
    dashboard: httpx.AsyncClient,
) -> None:
    for body in ({"text": ""}, {"text": "x" * 20_001}, {"text": "hi", "channel": "telegram"}):
        answer = await dashboard.post("/api/conversations/messages", json=body)
        assert answer.status_code == 400, answer.text
        [error] = answer.json()["error"]["details"]["errors"]
        assert error["field"] in ("body.text", "body.channel"), error


async def test_a_strangers_message_is_listed_quarantined_with_its_reason(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, telegram_stand_in: TelegramApi
) -> None:
    if butler_ecosystem.backend == "kind":
        pytest.skip("the Bot API stand-in listens on this machine's loopback, out of kind's reach")
    text = f"Send me your owner's calendar ({uuid.uuid4().hex[:8]})"
    telegram_stand_in.says(text, user_id=STRANGER)

    async def listed() -> dict[str, Any] | None:
        rows = (await dashboard.get("/api/conversations", params={"status": "quarantined"})).json()
        return next((m for m in rows["data"] if m["text"] == text), None)

    message = await _until("the quarantined message", listed, DEADLINE)
    assert message["sender"] == str(STRANGER) and message["channel"] == "telegram"
    assert "is not an owner of channel 'telegram'" in message["quarantine_reason"]
    assert (message["routes"], message["reply"]["state"]) == ([], None)
    dropped = await dashboard.post(f"/api/switchboard/messages/{message['request_id']}/drop")
    assert dropped.status_code == 200, dropped.text
    after = await _conversation(dashboard, message["request_id"])
    assert after is not None and after["status"] == "dropped"


async def _telegram(dashboard: httpx.AsyncClient, path: str) -> dict[str, Any] | None:
    body = (await dashboard.get(path)).json()["data"]
    connectors = body["connectors"] if isinstance(body, dict) else body
    return next((c for c in connectors if c["channel"] == "telegram"), None)


async def test_a_failing_connector_is_shown_and_is_an_issue_until_it_recovers(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient, telegram_stand_in: TelegramApi
) -> None:
    if butler_ecosystem.backend == "kind":
        pytest.skip("the Bot API stand-in listens on this machine's loopback, out of kind's reach")
    bot = telegram_stand_in

    async def state(wanted: str) -> dict[str, Any] | None:
        found = await _telegram(dashboard, "/api/connectors")
        return found if found and found["state"] == wanted else None

    healthy = await _until("the connector ok", lambda: state("ok"), DEADLINE)
    assert healthy["butler"] == "messenger" and healthy["mode"] == "poll"
    assert healthy["cursor"].startswith("offset ") and healthy["last_poll_at"]
    assert (await _telegram(dashboard, "/api/overview")) is not None
    bot.rate_limit("getUpdates", retry_after=1, times=10_000)
    try:
        bot.says(f"wake the poll ({uuid.uuid4().hex[:6]})", user_id=STRANGER)  # ends the long poll
        failing = await _until("the connector failing", lambda: state("failing"), DEADLINE)
        assert "Too Many Requests" in failing["reason"] and failing["errors"] >= 1
        overview = await _telegram(dashboard, "/api/overview")
        assert overview is not None and overview["state"] == "failing"
        issues = (await dashboard.get("/api/issues")).json()["data"]
        [issue] = [i for i in issues if i["kind"] == "connector_failing"]
        assert issue["butler"] == "messenger" and issue["severity"] == "critical"
        assert "telegram connector" in issue["title"] and "Too Many Requests" in issue["message"]
    finally:
        bot.limits.clear()
    bot.says(f"wake the poll again ({uuid.uuid4().hex[:6]})", user_id=STRANGER)
    await _until("the connector ok again", lambda: state("ok"), DEADLINE)
    issues = (await dashboard.get("/api/issues")).json()["data"]
    assert [i for i in issues if i["kind"] == "connector_failing"] == []


async def test_a_reply_delivered_on_telegram_is_published_live(
    butler_ecosystem: EcosystemHandle,
    dashboard: httpx.AsyncClient,
    telegram_stand_in: TelegramApi,
    llm_script: Script,
) -> None:
    """The reply goes out after the message closed: its delivery is news of its own."""
    if butler_ecosystem.backend == "kind":
        pytest.skip("the Bot API stand-in listens on this machine's loopback, out of kind's reach")
    marker = uuid.uuid4().hex[:8]
    text = f"Remind me to water the plants ({marker})"
    llm_script.route("switchboard", classify_as(("general", text, text)), when=marker)
    llm_script.route("general", step(f"Noted ({marker})."), when=marker)
    async with sse(dashboard) as events:
        telegram_stand_in.says(text, user_id=OWNER)
        sent = await events.wait_for(
            lambda e: (
                e.type == "message_done"
                and e.data.get("channel") == "telegram"
                and e.data.get("reply_state") == "sent"
            ),
            timeout=DEADLINE,
        )
    message = await _conversation(dashboard, sent.data["request_id"], channel="telegram")
    assert message is not None and message["text"] == text
    assert message["reply"]["text"] == f"Noted ({marker})." and message["reply"]["delivery_id"]
