"""Reminders end to end: from a butler without the messenger, through the switchboard's
relay, to the messenger's delivery log; across a restart of the reminding butler.

The messenger's Telegram runs against the suite's Bot API stand-in: each due
occurrence is sent once, and the reminder's attempt names the messenger's row."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from butlers.testing.script_server import Script, step
from butlers.waiting import wait_until

from .harness.ecosystem import EcosystemHandle


async def _first_attempt(handle: EcosystemHandle, butler: str, reminder_id: str) -> dict[str, Any]:
    async def attempted() -> dict[str, Any] | None:
        row = await handle.call(butler, "reminder_get", {"reminder_id": reminder_id})
        return row if row["deliveries"] else None

    row: dict[str, Any] = await wait_until(
        attempted, timeout=60, interval=0.1, message=f"a delivery attempt of {reminder_id}"
    )
    return row


def _in_order(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A reminder's attempts, first first (a failed one is retried 5 s later)."""
    attempts = sorted(row["deliveries"], key=lambda d: d["attempt"])
    assert [a["attempt"] for a in attempts] == list(range(1, len(attempts) + 1))
    return attempts


def _one_row_each(attempts: list[dict[str, Any]], logged: list[dict[str, Any]]) -> bool:
    """Each attempt reached the messenger exactly once: one delivery row per attempt."""
    return sorted(r["id"] for r in logged) == sorted(a["delivery_id"] for a in attempts)


async def _settled(
    handle: EcosystemHandle, butler: str, reminder_id: str, text: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """After the reminder was cancelled: its attempts and the messenger's rows for it,
    once an attempt still in flight has been recorded on both sides."""

    async def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        row = await handle.call(butler, "reminder_get", {"reminder_id": reminder_id})
        attempts, logged = _in_order(row), await _messenger_rows(handle, text)
        return (attempts, logged) if _one_row_each(attempts, logged) else None

    found: tuple[list[dict[str, Any]], list[dict[str, Any]]] = await wait_until(
        both, timeout=30, interval=0.2, message="one messenger row per attempt"
    )
    return found


async def _messenger_rows(handle: EcosystemHandle, text: str) -> list[dict[str, Any]]:
    rows = await handle.call("messenger", "deliveries_list", {"limit": 500})
    return [r for r in rows if text in r["body"]]


async def _cancel(handle: EcosystemHandle, butler: str, reminder_id: str) -> None:
    # No retries of a delivery no channel can make outlive the test.
    await handle.call_raw(butler, "reminder_cancel", {"reminder_id": reminder_id})


async def test_a_reminder_reaches_the_messenger_once_through_the_switchboard(
    butler_ecosystem: EcosystemHandle,
) -> None:
    text = f"stretch your legs {datetime.now(UTC).timestamp()}"
    made = await butler_ecosystem.call("health", "remind", {"text": text, "after": "1s"})
    try:
        await _first_attempt(butler_ecosystem, "health", made["id"])
    finally:
        await _cancel(butler_ecosystem, "health", made["id"])
    attempts, logged = await _settled(butler_ecosystem, "health", made["id"], text)
    assert logged[0]["body"] == f"Reminder: {text}"
    assert logged[0]["recipient"] is None  # the owner's channel, nobody else
    assert [(a["status"], a["late"]) for a in attempts] == [("sent", False)]
    assert logged[0]["status"] == "sent"


async def test_a_recurring_reminder_is_sent_and_waits_for_its_next_occurrence(
    butler_ecosystem: EcosystemHandle,
) -> None:
    text = f"weekly review {datetime.now(UTC).timestamp()}"
    start = datetime.now(UTC).isoformat()
    made = await butler_ecosystem.call(
        "messenger", "remind", {"text": text, "at": start, "rrule": "FREQ=WEEKLY"}
    )
    try:
        row = await _first_attempt(butler_ecosystem, "messenger", made["id"])
    finally:
        await _cancel(butler_ecosystem, "messenger", made["id"])
    assert row["rrule"] == "FREQ=WEEKLY"
    attempts, _ = await _settled(butler_ecosystem, "messenger", made["id"], text)
    assert [(d["due_at"], d["status"]) for d in attempts] == [(made["first_due_at"], "sent")]


async def test_a_reminder_due_while_its_butler_is_down_is_sent_late_once_at_start(
    butler_ecosystem: EcosystemHandle,
) -> None:
    text = f"pay the rent {datetime.now(UTC).timestamp()}"
    made = await butler_ecosystem.call("general", "remind", {"text": text, "after": "2s"})
    due = datetime.fromisoformat(made["next_due_at"])
    await butler_ecosystem.kill("general")
    try:
        assert not await _messenger_rows(butler_ecosystem, text)
        await wait_until(lambda: datetime.now(UTC) > due, timeout=10, interval=0.1)
    finally:
        await butler_ecosystem.restart("general")
    try:
        await _first_attempt(butler_ecosystem, "general", made["id"])
    finally:
        await _cancel(butler_ecosystem, "general", made["id"])
    attempts, logged = await _settled(butler_ecosystem, "general", made["id"], text)
    assert [(a["status"], a["late"]) for a in attempts] == [("sent", True)]
    assert all(r["body"].startswith("Reminder (late: it was due at ") for r in logged)


async def test_the_owner_cancels_a_pending_reminder_and_it_is_listed_no_more(
    butler_ecosystem: EcosystemHandle,
) -> None:
    made = await butler_ecosystem.call("relationship", "remind", {"text": "x", "after": "1h"})
    cancelled = await butler_ecosystem.call(
        "relationship", "reminder_cancel", {"reminder_id": made["id"]}
    )
    assert cancelled["status"] == "cancelled"
    listed = await butler_ecosystem.call("relationship", "reminders_list", {"status": "pending"})
    assert made["id"] not in {r["id"] for r in listed}
    again = await butler_ecosystem.call_raw(
        "relationship", "reminder_cancel", {"reminder_id": made["id"]}
    )
    assert again.is_error


async def test_a_session_reminds_and_proposes_a_schedule_that_exists_once_approved(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    stamp = int(datetime.now(UTC).timestamp())
    name, text = f"weekly-review-{stamp}", f"book the dentist {stamp}"
    proposal = {"name": name, "cron": "0 18 * * 0", "prompt": "Ask how the week went."}
    llm_script.route(
        "general",
        step(
            tool_calls=[
                {"name": "remind", "arguments": {"text": text, "after": "1h"}},
                {"name": "schedule_propose", "arguments": proposal},
            ]
        ),
        step("Reminder set; the weekly review awaits your approval."),
    )
    result = await butler_ecosystem.call("general", "trigger", {"prompt": "Help me plan"})
    assert result["success"] is True
    pending = await butler_ecosystem.call("general", "reminders_list", {"status": "pending"})
    [reminder] = [r for r in pending if r["text"] == text]
    assert reminder["created_by"] == f"session:{result['session_id']}"
    approvals = await butler_ecosystem.call("general", "approval_list", {"status": "pending"})
    [held] = [a for a in approvals if a["tool_args"].get("name") == name]
    schedules = await butler_ecosystem.call("general", "schedule_list")
    assert name not in {s["name"] for s in schedules}
    try:
        await butler_ecosystem.call(
            "general", "approval_decide", {"approval_id": held["id"], "decision": "approve"}
        )
        schedules = await butler_ecosystem.call("general", "schedule_list")
        [created] = [s for s in schedules if s["name"] == name]
        assert (created["cron"], created["prompt"]) == (proposal["cron"], proposal["prompt"])
    finally:
        await butler_ecosystem.call_raw("general", "schedule_delete", {"name": name})
        await _cancel(butler_ecosystem, "general", reminder["id"])


async def test_the_morning_briefing_goes_out_with_a_butler_down_and_says_why(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    stamp = int(datetime.now(UTC).timestamp())
    name = f"Briefing Friend {stamp}"
    await butler_ecosystem.call(
        "relationship",
        "contact_add",
        {"name": name, "birthday": datetime.now(UTC).date().isoformat()},
    )
    text = f"Good morning {stamp}: Briefing Friend's birthday is today."
    llm_script.route("general", step(text))
    await butler_ecosystem.kill("health")
    try:
        result = await butler_ecosystem.call("general", "briefing_send")
    finally:
        await butler_ecosystem.restart("health")
    assert result["message"] == text
    assert result["model_error"] is None
    skipped = result["skipped"]
    assert "health did not answer" in skipped["health"]
    # The calendar is general's: a section where its CalDAV server is reachable (the
    # local and control-plane lanes), else skipped with the module's failure.
    calendar = [s for s in result["sections"] if s["module"] == "calendar"]
    assert [s["butler"] for s in calendar] == ["general"] or skipped["calendar"]
    birthdays = [
        line for s in result["sections"] if s["module"] == "contacts" for line in s["lines"]
    ]
    assert f"birthday: {name} today" in birthdays
    [prompt] = [r for r in llm_script.requests_for("general") if str(stamp) in str(r)]
    assert "skipped" in str(prompt)
    logged = await _messenger_rows(butler_ecosystem, text)
    assert [r["id"] for r in logged] == [result["delivery_id"]]
