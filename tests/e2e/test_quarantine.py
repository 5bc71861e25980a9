"""Quarantined messages: a stranger's message is listed with its reason and runs
nothing; the owner releases one (then it is routed and answered like the owner's own,
the answer going to the owner) and drops another.

Asserted on every backend through the switchboard's MCP tools and rows; where the
backend runs a dashboard, the owner lists, drops and releases there (its API, as the
page calls it) and the tools confirm what it did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
import pytest
from fastmcp.exceptions import ToolError

from butlers.testing.script_server import Script, step
from tests.support.telegram_api import TelegramApi

from .dashboard.conftest import CSRF
from .harness.ecosystem import EcosystemHandle
from .harness.telegram import OWNER, STRANGER
from .test_crash_recovery import _until
from .test_switchboard_flow import classify_as


@asynccontextmanager
async def _dashboard(handle: EcosystemHandle) -> AsyncIterator[httpx.AsyncClient | None]:
    """A client of the backend's dashboard; None where it runs none (kind)."""
    if handle.dashboard_url is None:
        yield None
        return
    token = handle.dashboard_token
    headers = CSRF | ({"Authorization": f"Bearer {token}"} if token else {})
    async with httpx.AsyncClient(base_url=handle.dashboard_url, headers=headers, timeout=60) as c:
        yield c


async def _quarantined(handle: EcosystemHandle, text: str) -> dict[str, Any] | None:
    listed = await handle.call("switchboard", "quarantine_list", {"limit": 100})
    return next((m for m in listed if m["text"] == text), None)


async def _on_dashboard(dashboard: httpx.AsyncClient, text: str) -> dict[str, Any] | None:
    listed = (
        await dashboard.get("/api/switchboard/messages", params={"status": "quarantined"})
    ).json()["data"]
    return next((m for m in listed if m["text"] == text), None)


async def _decide(
    handle: EcosystemHandle, dashboard: httpx.AsyncClient | None, verb: str, request_id: str
) -> dict[str, Any]:
    """Drop or release a message as the owner: on the dashboard where one runs, else with
    the switchboard's tool. A refusal raises ToolError (with the dashboard's text)."""
    if dashboard is None:
        return dict(await handle.call("switchboard", f"message_{verb}", {"request_id": request_id}))
    answer = await dashboard.post(f"/api/switchboard/messages/{request_id}/{verb}")
    if answer.status_code != 200:
        raise ToolError(f"{answer.status_code}: {answer.text}")
    return dict(answer.json()["data"])


async def _message(handle: EcosystemHandle, request_id: str) -> dict[str, Any]:
    return dict(await handle.call("switchboard", "message_get", {"request_id": request_id}))


async def test_the_owner_releases_one_strangers_message_and_drops_another(
    butler_ecosystem: EcosystemHandle, telegram_stand_in: TelegramApi, llm_script: Script
) -> None:
    eco, bot = butler_ecosystem, telegram_stand_in
    kept, dropped = "Hi, it is your dentist: please call me back", "Click this link"
    bot.says(kept, user_id=STRANGER)
    bot.says(dropped, user_id=STRANGER)
    row = await _until("listed", lambda: _quarantined(eco, kept))
    assert (row["channel"], row["sender"]) == ("telegram", str(STRANGER))
    assert f"'{STRANGER}' is not an owner of channel 'telegram'" in row["quarantine_reason"]
    other = await _until("listed", lambda: _quarantined(eco, dropped))
    switchboard = await eco.pool("switchboard")
    ran = await switchboard.fetchval(
        "SELECT count(*) FROM sessions WHERE trigger_source = ANY($1::text[])",
        [f"classify:{row['request_id']}", f"classify:{other['request_id']}"],
    )
    assert (ran, (await _message(eco, row["request_id"]))["routes"]) == (0, [])

    async with _dashboard(eco) as dashboard:
        if dashboard is not None:
            shown = await _until("listed on the dashboard", lambda: _on_dashboard(dashboard, kept))
            assert shown["quarantine_reason"] == row["quarantine_reason"]
        answer = await _decide(eco, dashboard, "drop", other["request_id"])
        assert answer["status"] == "dropped"
        assert (await _message(eco, other["request_id"]))["status"] == "dropped"

        llm_script.route("switchboard", classify_as(("general", "Call the dentist back", kept)))
        llm_script.route("general", step("Noted: call the dentist back."))
        await _decide(eco, dashboard, "release", row["request_id"])
        # The answer goes to the owner, never back to the stranger.
        [reply] = await _until(
            "the owner told",
            lambda: [m for m in bot.sent if "call the dentist back" in m["text"]],
        )
        assert reply["chat"]["id"] == OWNER and "reply_to_message" not in reply
        assert reply["text"] == (
            f"About the message from {STRANGER} you released:\nNoted: call the dentist back."
        )
        with pytest.raises(ToolError, match="not quarantined"):
            await _decide(eco, dashboard, "release", row["request_id"])
    released = await _message(eco, row["request_id"])
    assert released["status"] == "dispatched"
    assert [r["butler"] for r in released["routes"]] == ["general"]
    assert [m["text"] for m in await eco.call("switchboard", "quarantine_list", {})].count(
        kept
    ) == 0
