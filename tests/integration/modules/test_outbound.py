"""The outbound guard: sends of every tool reach only the owner's destinations and allowed
contacts; any other recipient waits for the owner's approval; every attempt is a delivery."""

import asyncio
import uuid
from typing import Any

import pytest

from butlers.waiting import wait_until

from .conftest import ButlerFactory, ModuleButler
from .fakes.smtp import fake_smtp
from .fakes.telegram import FakeTelegram, fake_telegram

TOKEN = "123:fake-token"
OWNER_CHAT = "42"
ENV = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_CHAT_ID": OWNER_CHAT}


def modules(fake: FakeTelegram, *, approvals: bool = True) -> dict[str, Any]:
    chosen: dict[str, Any] = {
        "messenger": {"defaultChannel": "telegram", "owner": {"telegram": [OWNER_CHAT]}},
        "telegram": {"apiBase": fake.url},
    }
    return {**chosen, "approvals": {}} if approvals else chosen


async def pending(butler: ModuleButler) -> dict[str, Any]:
    async def first() -> dict[str, Any] | None:
        rows = await butler.call("approval_list", {"status": "pending"})
        return rows[0] if rows else None

    return await wait_until(first, timeout=10, interval=0.02, message="no pending approval")


async def deliveries(butler: ModuleButler) -> list[tuple[str | None, str, str | None]]:
    rows = await butler.call("deliveries_list", {})
    return [(d["recipient"], d["status"], d["tool"]) for d in reversed(rows)]


async def test_owner_destinations_need_no_approval(module_butler: ButlerFactory) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(modules(fake), environ=ENV)
        await butler.call("notify", {"message": "pills at 8"})
        await butler.call("notify", {"message": "pills at 9", "recipient": OWNER_CHAT})
        sent = await butler.call("telegram_send", {"text": "hi", "chat_id": OWNER_CHAT})
    assert [m["chat_id"] for m in fake.sent] == [OWNER_CHAT, OWNER_CHAT, OWNER_CHAT]
    assert sent["delivery_id"]
    assert await deliveries(butler) == [
        (None, "sent", "notify"),
        (OWNER_CHAT, "sent", "notify"),
        (OWNER_CHAT, "sent", "telegram_send"),
    ]
    assert await butler.call("approval_list", {"status": None}) == []


async def test_a_stranger_is_held_with_the_full_text_then_sent_once_approved(
    module_butler: ButlerFactory,
) -> None:
    text = "the whole delivery log, PIN 4711 included"
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(modules(fake), environ=ENV)
        call = asyncio.create_task(butler.call("telegram_send", {"text": text, "chat_id": "666"}))
        row = await pending(butler)
        assert row["tool_name"] == "telegram_send"
        assert (row["tool_args"]["recipient"], row["tool_args"]["body"]) == ("666", text)
        assert await deliveries(butler) == [("666", "held", "telegram_send")]
        assert fake.sent == []
        await butler.call("approval_decide", {"approval_id": row["id"], "decision": "approved"})
        await asyncio.wait_for(call, 10)
    assert fake.sent == [{"chat_id": "666", "text": text}]
    [delivery] = await butler.call("deliveries_list", {})
    assert (delivery["status"], delivery["approval_id"]) == ("sent", row["id"])


async def test_a_denied_send_is_refused_and_never_leaves(module_butler: ButlerFactory) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(modules(fake), environ=ENV)
        call = asyncio.create_task(
            butler.call("notify", {"message": "secret", "recipient": "@outsider_chat"})
        )
        row = await pending(butler)
        await butler.call(
            "approval_decide", {"approval_id": row["id"], "decision": "denied", "reason": "no"}
        )
        delivery = await asyncio.wait_for(call, 10)
    assert fake.sent == []
    assert delivery["status"] == "refused" and "denied" in delivery["error"]
    assert await deliveries(butler) == [("@outsider_chat", "refused", "notify")]


async def test_without_the_approvals_module_a_stranger_is_refused(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(modules(fake, approvals=False), environ=ENV)
        result = await butler.call_raw("telegram_send", {"text": "x", "chat_id": "666"})
    assert result.is_error and "no approvals module" in result.content[0].text
    assert fake.sent == []
    assert await deliveries(butler) == [("666", "refused", "telegram_send")]


async def test_an_allowed_contact_needs_no_approval_until_disallowed(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(modules(fake), environ=ENV, approval_timeout=0.3)
        await butler.call("contact_allow", {"channel": "telegram", "address": "777", "name": "Ann"})
        assert (await butler.call("notify", {"message": "hi", "recipient": "777"}))[
            "status"
        ] == "sent"
        await butler.call("contact_disallow", {"channel": "telegram", "address": "777"})
        late = await butler.call("notify", {"message": "again", "recipient": "777"})
    assert [m["chat_id"] for m in fake.sent] == ["777"]
    assert late["status"] == "refused" and "expired" in late["error"]


@pytest.mark.parametrize(
    "to", ["me@example.org, thief@example.net", "me@example.org\r\nBcc: thief@example.net"]
)
async def test_email_to_several_recipients_is_refused(
    module_butler: ButlerFactory, to: str
) -> None:
    async with fake_smtp("bot@example.org", "s3cret") as smtp:
        butler = await module_butler(
            {
                "messenger": {"owner": {"email": ["Me@Example.org"]}},
                "email": {"smtpHost": "127.0.0.1", "smtpPort": smtp.port, "starttls": False},
            },
            environ={"EMAIL_USERNAME": "bot@example.org", "EMAIL_PASSWORD": "s3cret"},
        )
        await butler.call("email_send", {"to": "ME@example.org", "subject": "s", "body": "b"})
        result = await butler.call_raw("email_send", {"to": to, "subject": "s", "body": "b"})
    message = result.content[0].text
    assert result.is_error and ("exactly one address" in message or "line breaks" in message)
    assert [m["to"] for m in smtp.messages] == [["me@example.org"]]
    statuses = [(d["status"], d["tool"]) for d in await butler.call("deliveries_list", {})]
    assert statuses == [("refused", "email_send"), ("sent", "email_send")]


async def test_channel_send_tools_need_the_messenger(module_butler: ButlerFactory) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler({"telegram": {"apiBase": fake.url}}, environ=ENV)
        result = await butler.call_raw("telegram_send", {"text": "x"})
    assert result.is_error and "needs the messenger module" in result.content[0].text
    assert fake.sent == []


async def test_a_malformed_owner_destination_fails_the_module_naming_it(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"messenger": {"owner": {"email": ["me@x.org, you@y.org"]}}})
    state = butler.module("messenger")
    assert (state["status"], state["phase"]) == ("failed", "config")
    assert "exactly one address" in state["error"] and "owner" in state["error"]


async def test_a_reply_on_a_thread_that_is_not_the_owners_is_held(
    module_butler: ButlerFactory,
) -> None:
    """The switchboard's `reply` goes through the guard too: a group chat is not the
    owner's, so the answer waits for the owner, and a denied one is never sent, not
    even when the switchboard asks again."""
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(modules(fake), environ=ENV)
        arguments = {
            "channel": "telegram",
            "thread": {"chat_id": "-100777", "message_id": 5},
            "text": "your PIN is 4711",
            "request_id": str(uuid.uuid4()),
        }
        call = asyncio.create_task(butler.call("reply", arguments))
        row = await pending(butler)
        assert (row["tool_name"], row["tool_args"]["recipient"]) == ("reply", "-100777")
        assert row["tool_args"]["body"] == "your PIN is 4711"
        assert await deliveries(butler) == [("-100777", "held", "reply")]
        await butler.call(
            "approval_decide", {"approval_id": row["id"], "decision": "denied", "reason": "no"}
        )
        refused = await asyncio.wait_for(call, 10)
        again = await butler.call("reply", arguments)
        mine = {"chat_id": OWNER_CHAT, "message_id": 6}
        owners = await butler.call(
            "reply", {**arguments, "request_id": str(uuid.uuid4()), "thread": mine}
        )
    assert refused["status"] == "refused" and "denied" in refused["error"]
    assert again == refused  # asked again: the refusal stands, nothing is held twice
    assert owners["status"] == "sent"
    assert [m["chat_id"] for m in fake.sent] == [OWNER_CHAT]
