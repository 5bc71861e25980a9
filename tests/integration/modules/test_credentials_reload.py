"""Channel modules take changed credentials while the butler runs: a new bot token
(the Telegram stand-in) and a new mail password (a real Dovecot, the SMTP responder in
front of it) are used without a restart, and the inbound connectors go on from their
cursors. The switchboard is not reached here (nothing is handed over): what is checked
is that the connectors log in again and where they resume."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from butlers.modules.base import Module
from butlers.modules.email.store import InboundStore
from butlers.modules.telegram.store import TelegramStore
from butlers.waiting import wait_until
from tests.support.dovecot import dovecot, smtp_into, unavailable
from tests.support.telegram_api import BOT, telegram_api

from .conftest import ButlerFactory, ModuleButler

NOWHERE = "http://127.0.0.1:9/mcp"  # a switchboard nothing here hands anything to
OWNER_CHAT = "4242"
MAIL_BOT = "butler@example.org"


def _started(butler: ModuleButler, name: str) -> Module:
    [module] = [m for m, _ in butler.built.modules.started if m.name == name]
    return module


async def test_a_new_bot_token_is_used_for_sends_and_polling_resumes_at_its_cursor(
    module_butler: ButlerFactory,
) -> None:
    async with telegram_api("1:first") as api:
        butler = await module_butler(
            {"telegram": {"apiBase": api.url, "inbound": True, "pollTimeoutSeconds": 1}},
            environ={"TELEGRAM_CHAT_ID": OWNER_CHAT},
            stored={"TELEGRAM_BOT_TOKEN": "1:first"},
            switchboard_url=NOWHERE,
        )
        module: Any = _started(butler, "telegram")
        store = TelegramStore(butler.context.pool, BOT["username"])
        # Where an earlier run left the connector: update 41 handed over.
        await store.handed(
            41,
            event_id=None,
            chat_id=None,
            sender=None,
            kind="skipped",
            request_id=None,
            outcome="skipped",
            detail="set by the test",
        )

        # The token is revoked (BotFather): polling and sends fail with the old one...
        api.token = "1:second"

        async def refused() -> bool:
            return "Unauthorized" in str((await store.cursor()).last_error)

        await wait_until(refused, timeout=10, message="the poller's 401 recorded")
        with pytest.raises(Exception, match="401"):
            await module.bot.send(None, None, "with the old token")

        # ...until the owner stores the new one: no restart, the same module.
        seen = len(api.calls)
        await butler.call("secret_put", {"key": "TELEGRAM_BOT_TOKEN", "value": "1:second"})
        await module.bot.send(None, None, "with the new token")
        assert [m["text"] for m in api.sent] == ["with the new token"]
        assert api.sent[0]["chat"]["id"] == int(OWNER_CHAT)

        def polls_after_change() -> list[dict[str, Any]]:
            return [p for name, p in api.calls[seen:] if name == "getUpdates"]

        await wait_until(
            lambda: bool(polls_after_change()), timeout=10, message="a poll with the new token"
        )
        assert polls_after_change()[0]["offset"] == 42, "the cursor was kept"
        assert (await store.cursor()).next_offset == 42
        assert _started(butler, "telegram") is module, "never restarted"


async def test_a_refused_new_bot_token_leaves_the_current_one_in_use(
    module_butler: ButlerFactory,
) -> None:
    async with telegram_api("1:first") as api:
        butler = await module_butler(
            {"telegram": {"apiBase": api.url}},
            environ={"TELEGRAM_CHAT_ID": OWNER_CHAT},
            stored={"TELEGRAM_BOT_TOKEN": "1:first"},
        )
        module: Any = _started(butler, "telegram")
        await butler.call("secret_put", {"key": "TELEGRAM_BOT_TOKEN", "value": "1:typo"})
        await module.bot.send(None, None, "still sent")
        assert [m["text"] for m in api.sent] == ["still sent"]


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
async def test_a_new_mail_password_is_used_to_send_read_and_by_the_inbound_connector(
    module_butler: ButlerFactory,
) -> None:
    with dovecot({MAIL_BOT: "first", "owner@example.org": "owner-secret"}) as server:
        # Mail from before the first start: the connector's cursor starts past it.
        for n in (1, 2):
            server.deliver(MAIL_BOT, f"Subject: old {n}\r\n\r\nbefore\r\n".encode())
        async with smtp_into(server, MAIL_BOT, "first") as smtp:
            butler = await module_butler(
                {
                    "email": {
                        "smtpHost": "127.0.0.1",
                        "smtpPort": smtp.port,
                        "starttls": False,
                        "imapHost": server.host,
                        "imapPort": server.port,
                        "imapSsl": False,
                        "inbound": True,
                        "imapPollSeconds": 0.2,
                    }
                },
                environ={"EMAIL_USERNAME": MAIL_BOT, "EMAIL_DEFAULT_TO": "owner@example.org"},
                stored={"EMAIL_PASSWORD": "first"},
                switchboard_url=NOWHERE,
            )
            module: Any = _started(butler, "email")
            first = module.connector
            await wait_until(first.connected.is_set, timeout=10, message="the IMAP session")
            store = InboundStore(butler.context.pool, MAIL_BOT, "INBOX")
            before = await store.cursor()
            assert before is not None and before.last_uid == 2

            # The password changes on both servers: the butler's logins fail...
            await asyncio.to_thread(server.set_password, MAIL_BOT, "second")
            smtp.password = "second"
            with pytest.raises(Exception, match="535|authentication"):
                await module.mailbox.send(None, "refused", "with the old password")

            # ...until the owner stores the new one.
            await butler.call("secret_put", {"key": "EMAIL_PASSWORD", "value": "second"})
            await module.mailbox.send(None, "hello", "with the new password")
            assert [m["to"] for m in smtp.messages] == [["owner@example.org"]]
            inbox = await butler.call("email_inbox", {"unseen_only": False})
            assert sorted(m["subject"] for m in inbox) == ["old 1", "old 2"]

            connector = module.connector
            assert connector is not first, "the connector logged in again"
            await wait_until(connector.connected.is_set, timeout=10, message="a new session")
            after = await store.cursor()
            assert after is not None
            assert (after.uidvalidity, after.last_uid) == (before.uidvalidity, 2)
            assert _started(butler, "email") is module, "never restarted"
