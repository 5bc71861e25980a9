"""Quarantined messages in the dashboard: listed with their reason, released (then
routed and answered like the owner's own) or dropped."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

from butlers.testing.script_server import Script, step
from tests.support.telegram_api import TelegramApi

from ..harness.ecosystem import EcosystemHandle
from ..harness.telegram import OWNER, STRANGER
from ..test_crash_recovery import _until
from ..test_switchboard_flow import classify_as


async def _quarantined(dashboard: httpx.AsyncClient, text: str) -> dict[str, Any] | None:
    listed = (
        await dashboard.get("/api/switchboard/messages", params={"status": "quarantined"})
    ).json()["data"]
    return next((m for m in listed if m["text"] == text), None)


async def test_the_owner_releases_one_strangers_message_and_drops_another(
    butler_ecosystem: EcosystemHandle,
    dashboard: httpx.AsyncClient,
    telegram_stand_in: TelegramApi,
    llm_script: Script,
) -> None:
    bot = telegram_stand_in
    kept, dropped = "Hi, it is your dentist: please call me back", "Click this link"
    bot.says(kept, user_id=STRANGER)
    bot.says(dropped, user_id=STRANGER)
    row = await _until("listed", lambda: _quarantined(dashboard, kept))
    assert "is not an owner" in row["quarantine_reason"]
    other = await _until("listed", lambda: _quarantined(dashboard, dropped))

    answer = await dashboard.post(f"/api/switchboard/messages/{other['id']}/drop")
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["status"] == "dropped"

    llm_script.route("switchboard", classify_as(("general", "Call the dentist back", kept)))
    llm_script.route("general", step("Noted: call the dentist back."))
    answer = await dashboard.post(f"/api/switchboard/messages/{row['id']}/release")
    assert answer.status_code == 200, answer.text
    # The answer goes to the owner, never back to the stranger.
    [reply] = await _until(
        "the owner told",
        lambda: [m for m in bot.sent if "call the dentist back" in m["text"]],
    )
    assert reply["chat"]["id"] == OWNER and "reply_to_message" not in reply
    assert reply["text"] == (
        f"About the message from {STRANGER} you released:\nNoted: call the dentist back."
    )
    again = await dashboard.post(f"/api/switchboard/messages/{row['id']}/release")
    assert again.status_code != 200 and "not quarantined" in again.text
