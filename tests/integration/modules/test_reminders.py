"""Reminders delivered through the messenger (a fake Bot API behind it), once."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastmcp.exceptions import ToolError

from butlers.auth.identity import current_identity, session
from butlers.modules.reminders.delivery import DeliveryLoop
from butlers.modules.reminders.module import RemindersModule
from butlers.waiting import wait_until

from .conftest import ButlerFactory, ModuleButler
from .fakes.telegram import fake_telegram

TOKEN = "123:fake-token"


async def _butler(module_butler: ButlerFactory, url: str, **reminders: Any) -> ModuleButler:
    return await module_butler(
        {"messenger": {}, "telegram": {"apiBase": url}, "reminders": reminders},
        environ={"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_CHAT_ID": "42"},
    )


def _loop(butler: ModuleButler) -> DeliveryLoop:
    module = next(m for m, _ in butler.built.modules.started if isinstance(m, RemindersModule))
    assert module.loop is not None
    return module.loop


async def _settled(butler: ModuleButler, reminder_id: str, status: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        row = await butler.call("reminder_get", {"reminder_id": reminder_id})
        return row if row["status"] == status or row["delivered_count"] else None

    return await wait_until(done, timeout=15, interval=0.05, message=f"reminder {status}")


async def test_a_reminder_is_delivered_once_with_its_delivery_row(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await _butler(module_butler, fake.url)
        made = await butler.call("remind", {"text": "take the pills", "after": "1s"})
        row = await _settled(butler, made["id"], "delivered")
        assert await _loop(butler).deliver_due() == 0  # nothing more is due
    assert row["status"] == "delivered"
    assert [m["text"] for m in fake.sent] == ["Reminder: take the pills"]
    (attempt,) = row["deliveries"]
    assert (attempt["status"], attempt["late"]) == ("sent", False)
    log = await butler.call("deliveries_list", {})
    assert [d["id"] for d in log] == [attempt["delivery_id"]]


async def test_a_recurring_reminder_moves_to_its_next_occurrence(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await _butler(module_butler, fake.url, timeZone="Europe/Paris")
        start = datetime.now(UTC) + timedelta(seconds=1)
        made = await butler.call(
            "remind", {"text": "water the plants", "at": start.isoformat(), "rrule": "FREQ=DAILY"}
        )
        row = await _settled(butler, made["id"], "delivered")
    assert row["status"] == "pending"
    assert row["delivered_count"] == 1
    first = datetime.fromisoformat(made["first_due_at"])
    assert first - start < timedelta(seconds=1)
    assert datetime.fromisoformat(row["next_due_at"]) - first == timedelta(days=1)
    assert [m["text"] for m in fake.sent] == ["Reminder: water the plants"]


async def test_a_failed_delivery_is_recorded_and_retried_later(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"messenger": {}, "reminders": {}})  # no channel at all
    made = await butler.call("remind", {"text": "call mum", "after": "1s"})

    async def attempted() -> dict[str, Any] | None:
        row = await butler.call("reminder_get", {"reminder_id": made["id"]})
        return row if row["deliveries"] else None

    row = await wait_until(attempted, timeout=15, interval=0.05, message="an attempt")
    assert row["status"] == "pending"
    assert row["deliveries"][0]["status"] == "failed"
    assert "not enabled" in row["deliveries"][0]["error"]
    assert datetime.fromisoformat(row["attempt_at"]) > datetime.fromisoformat(row["next_due_at"])


async def test_only_the_session_that_made_a_reminder_or_the_owner_cancels_it(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"reminders": {}})
    server = butler.built.server
    token = current_identity.set(session("00000000-0000-0000-0000-00000000000a"))
    try:
        made = (await server.call_tool("remind", {"text": "x", "after": "1h"})).structured_content
        made = made.get("result", made)
        other = current_identity.set(session("00000000-0000-0000-0000-00000000000b"))
        try:
            with pytest.raises(ToolError, match="only it or the owner"):
                await server.call_tool("reminder_cancel", {"reminder_id": made["id"]})
        finally:
            current_identity.reset(other)
        await server.call_tool("reminder_cancel", {"reminder_id": made["id"]})
    finally:
        current_identity.reset(token)
    again = await butler.call("remind", {"text": "y", "after": "1h"})
    cancelled = await butler.call("reminder_cancel", {"reminder_id": again["id"]})
    assert (cancelled["status"], cancelled["cancelled_by"]) == ("cancelled", "local")
    listed = await butler.call("reminders_list", {"status": "cancelled"})
    assert {r["id"] for r in listed} == {made["id"], again["id"]}


async def test_reminders_are_bounded_per_butler(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"reminders": {"maxPending": 2}})
    for text in ("a", "b"):
        await butler.call("remind", {"text": text, "after": "1h"})
    failed = await butler.call_raw("remind", {"text": "c", "after": "1h"})
    assert failed.is_error
    assert "at most 2" in failed.content[0].text
    too_often = await butler.call_raw("remind", {"text": "d", "rrule": "FREQ=MINUTELY"})
    assert "more often" in too_often.content[0].text
