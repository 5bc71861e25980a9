"""Channel modules against local fakes, and the messenger's delivery log through them."""

import pytest

from .conftest import ButlerFactory
from .fakes.imap import fake_imap
from .fakes.smtp import fake_smtp
from .fakes.telegram import fake_telegram

TOKEN = "123:fake-token"


async def test_telegram_without_token_fails_with_phase_credentials(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"telegram": {}, "messenger": {}})
    assert butler.module("telegram")["status"] == "failed"
    assert butler.module("telegram")["phase"] == "credentials"
    assert "TELEGRAM_BOT_TOKEN" in butler.module("telegram")["error"]
    assert "telegram_send" not in await butler.tool_names()
    assert butler.module("messenger")["status"] == "active"


async def test_telegram_with_wrong_token_fails_with_phase_credentials(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(
            {"telegram": {"apiBase": fake.url}}, environ={"TELEGRAM_BOT_TOKEN": "999:wrong"}
        )
    assert (butler.module("telegram")["status"], butler.module("telegram")["phase"]) == (
        "failed",
        "credentials",
    )


async def test_telegram_takes_its_token_from_the_secrets_store_over_the_environment(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(
            {"messenger": {}, "telegram": {"apiBase": fake.url}},
            environ={"TELEGRAM_BOT_TOKEN": "999:stale-env-token", "TELEGRAM_CHAT_ID": "42"},
            stored={"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_CHAT_ID": "7"},
        )
        result = await butler.call("telegram_send", {"text": "from the store"})
    assert butler.module("telegram")["status"] == "active"
    assert result["message_id"] == "1"
    assert fake.sent == [{"chat_id": "7", "text": "from the store"}]


async def test_telegram_send_reaches_the_bot_api(module_butler: ButlerFactory) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(
            {"messenger": {}, "telegram": {"apiBase": fake.url}},
            environ={"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_CHAT_ID": "42"},
        )
        result = await butler.call("telegram_send", {"text": "hello"})
    assert result["message_id"] == "1"
    assert fake.sent == [{"chat_id": "42", "text": "hello"}]


async def test_messenger_notify_over_telegram_logs_a_sent_delivery(
    module_butler: ButlerFactory,
) -> None:
    async with fake_telegram(TOKEN) as fake:
        butler = await module_butler(
            {"messenger": {}, "telegram": {"apiBase": fake.url}},
            environ={"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_CHAT_ID": "42"},
        )
        delivery = await butler.call(
            "notify", {"message": "take your pills", "channel": "telegram"}
        )
    assert delivery["status"] == "sent"
    assert fake.sent[0]["text"] == "take your pills"
    log = await butler.call("deliveries_list", {})
    assert [(d["channel"], d["status"]) for d in log] == [("telegram", "sent")]


async def test_email_without_credentials_fails_with_phase_credentials(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"email": {}})
    assert (butler.module("email")["status"], butler.module("email")["phase"]) == (
        "failed",
        "credentials",
    )
    assert "email_send" not in await butler.tool_names()


async def test_email_send_delivers_over_smtp(module_butler: ButlerFactory) -> None:
    async with fake_smtp("bot@example.org", "s3cret") as smtp:
        butler = await module_butler(
            {
                "messenger": {"owner": {"email": ["me@example.org"]}},
                "email": {"smtpHost": "127.0.0.1", "smtpPort": smtp.port, "starttls": False},
            },
            environ={"EMAIL_USERNAME": "bot@example.org", "EMAIL_PASSWORD": "s3cret"},
        )
        assert butler.module("email")["status"] == "active"
        await butler.call(
            "email_send", {"to": "me@example.org", "subject": "Hi", "body": "Dinner at 7"}
        )
    assert len(smtp.messages) == 1
    assert smtp.messages[0]["to"] == ["me@example.org"]
    assert "Dinner at 7" in str(smtp.messages[0]["data"])


async def test_email_with_wrong_password_fails_with_phase_credentials(
    module_butler: ButlerFactory,
) -> None:
    async with fake_smtp("bot@example.org", "s3cret") as smtp:
        butler = await module_butler(
            {"email": {"smtpHost": "127.0.0.1", "smtpPort": smtp.port, "starttls": False}},
            environ={"EMAIL_USERNAME": "bot@example.org", "EMAIL_PASSWORD": "wrong"},
        )
    assert (butler.module("email")["status"], butler.module("email")["phase"]) == (
        "failed",
        "credentials",
    )


@pytest.mark.parametrize("channel", ["telegram", "email"])
async def test_notify_over_an_unavailable_channel_logs_a_failed_delivery(
    module_butler: ButlerFactory, channel: str
) -> None:
    butler = await module_butler({"messenger": {}, "telegram": {}, "email": {}})
    delivery = await butler.call("notify", {"message": "hello", "channel": channel})
    assert delivery["status"] == "failed"
    assert "credentials" in delivery["error"]


async def test_email_inbox_reads_messages_over_imap(module_butler: ButlerFactory) -> None:
    raw = (
        b"From: friend@example.org\r\nTo: bot@example.org\r\nSubject: Lunch?\r\n"
        b"Content-Type: text/plain\r\n\r\nTomorrow at noon.\r\n"
    )
    async with (
        fake_smtp("bot@example.org", "s3cret") as smtp,
        fake_imap("bot@example.org", "s3cret", [raw]) as imap,
    ):
        config = {
            "smtpHost": "127.0.0.1",
            "smtpPort": smtp.port,
            "starttls": False,
            "imapHost": "127.0.0.1",
            "imapPort": imap.port,
            "imapSsl": False,
        }
        butler = await module_butler(
            {"email": config},
            environ={"EMAIL_USERNAME": "bot@example.org", "EMAIL_PASSWORD": "s3cret"},
        )
        inbox = await butler.call("email_inbox", {"limit": 5})
    assert [(m["from"], m["subject"]) for m in inbox] == [("friend@example.org", "Lunch?")]
    assert inbox[0]["body"].strip() == "Tomorrow at noon."
