"""The conversation loop's parts against real PostgreSQL and the Bot API stand-in: the
Telegram connector handing updates to a switchboard (cursor, restarts, webhook,
strangers), the switchboard's quarantine, and the messenger's reply on the thread."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from butlers.auth.identity import butler
from butlers.llm.toolbox import speaking_as
from butlers.modules.telegram.connector import Connector, RetryAfter
from butlers.modules.telegram.module import TelegramBot, TelegramConfig
from butlers.modules.telegram.store import TelegramStore
from butlers.switchboard.envelope import build_envelope
from butlers.waiting import wait_until
from tests.support.serving import served_asgi
from tests.support.telegram_api import BOT, telegram_api

from .conftest import ButlerFactory, ModuleButler

TOKEN = "123:stand-in"
OWNER, STRANGER = 4242, 666
# No model in these tests: a message the owner sends is classified by the fallback and
# routed to `general`, which is not registered; a short retry budget ends that quickly.
SWITCHBOARD = {"switchboard": {"owner": {"telegram": [OWNER]}, "routeRetrySeconds": 0.2}}


async def _switchboard(module_butler: ButlerFactory) -> ModuleButler:
    """A switchboard that knows a `messenger` running the telegram module."""
    switchboard = await module_butler(SWITCHBOARD)
    entry = {"description": "d", "url": "http://127.0.0.1:9/mcp"}
    await switchboard.call(
        "butler_register", {"name": "messenger", **entry, "modules": ["messenger", "telegram"]}
    )
    await switchboard.call("butler_register", {"name": "health", **entry, "modules": ["health"]})
    return switchboard


async def _hand_over(switchboard: ModuleButler, envelope: dict[str, Any], **options: Any) -> Any:
    """`ingest_v1` as the messenger's connector calls it (with the messenger's token)."""
    with speaking_as(butler("messenger")):
        return await switchboard.call("ingest_v1", {"envelope": envelope, **options})


async def _inbox(switchboard: ModuleButler) -> list[tuple[str, str, str]]:
    rows = await switchboard.context.pool.fetch(
        "SELECT sender, text, status FROM message_inbox ORDER BY received_at"
    )
    return [(r["sender"], r["text"], r["status"]) for r in rows]


async def _connector(
    module_butler: ButlerFactory, switchboard: ModuleButler, url: str
) -> tuple[Connector, TelegramBot, ModuleButler]:
    """A telegram butler's tables, and a connector handing over to `switchboard`."""
    telegram = await module_butler(
        {"telegram": {"apiBase": url}}, environ={"TELEGRAM_BOT_TOKEN": TOKEN}
    )

    async def submit(envelope: dict[str, Any]) -> Any:
        return await _hand_over(switchboard, envelope)

    store = TelegramStore(telegram.context.pool, BOT["username"])
    bot = TelegramBot(TelegramConfig(api_base=url, poll_timeout_seconds=0), TOKEN, None)
    return Connector(store, submit, BOT["username"]), bot, telegram


async def test_owner_messages_enter_strangers_wait_and_a_restart_neither_loses_nor_repeats(
    module_butler: ButlerFactory,
) -> None:
    switchboard = await _switchboard(module_butler)
    async with telegram_api(TOKEN) as api:
        connector, bot, telegram = await _connector(module_butler, switchboard, api.url)
        first = api.says("log 72 kg", user_id=OWNER)["message"]
        api.says("what is your PIN?", user_id=STRANGER)
        api.edits(first, "log 73 kg")
        api.says("and walked 5 km", user_id=OWNER)

        # The process dies while handing the batch over (after the switchboard took the
        # third update): nothing of the batch is recorded, the cursor stays, and a new
        # connector (same tables) hands the whole batch over again.
        taken = 0

        async def dies_after_third(envelope: dict[str, Any]) -> Any:
            nonlocal taken
            answer = await _hand_over(switchboard, envelope)
            taken += 1
            if taken == 3:
                raise asyncio.CancelledError  # the task is killed here
            return answer

        dying = Connector(connector._store, dies_after_third, BOT["username"])
        with pytest.raises(asyncio.CancelledError):
            await dying.poll_once(bot)
        assert await connector.poll_once(bot) == 4  # the stand-in gives them again
        assert await connector.poll_once(bot) == 0  # and, confirmed, never again
        await bot.close()

    # Each message once (a batch reaches the switchboard at once, in any order).
    inbox = {(sender, text): status for sender, text, status in await _inbox(switchboard)}
    assert sorted(inbox) == sorted(
        [
            ("4242", "log 72 kg"),
            ("666", "what is your PIN?"),
            ("4242", "(edited an earlier message) log 73 kg"),
            ("4242", "and walked 5 km"),
        ]
    )
    assert inbox[("666", "what is your PIN?")] == "quarantined"
    assert list(inbox.values()).count("quarantined") == 1
    handed = await telegram.call("telegram_updates", {})
    outcomes = [u["outcome"] for u in reversed(handed["updates"])]
    assert len(outcomes) == 4 and "duplicate" in outcomes  # repeats after the restart
    assert set(outcomes) <= {"accepted", "quarantined", "duplicate"}
    assert handed["cursor"]["next_offset"] == 5


async def test_a_strangers_message_runs_nothing_until_the_owner_releases_or_drops_it(
    module_butler: ButlerFactory,
) -> None:
    switchboard = await _switchboard(module_butler)
    envelope = build_envelope(
        "transfer money", channel="telegram", provider="telegram", sender=str(STRANGER)
    ).model_dump(mode="json")
    accepted = await _hand_over(switchboard, envelope, wait=True)
    assert "not an owner" in accepted["quarantined"]
    assert "classification" not in accepted  # nothing was classified or routed
    other = build_envelope("hello", channel="telegram", provider="telegram", sender="7")
    second = await _hand_over(switchboard, other.model_dump(mode="json"))
    listed = await switchboard.call("quarantine_list", {})
    assert {m["request_id"] for m in listed} == {accepted["request_id"], second["request_id"]}
    sessions = await switchboard.context.pool.fetchval("SELECT count(*) FROM sessions")
    assert sessions == 0

    dropped = await switchboard.call("message_drop", {"request_id": second["request_id"]})
    assert dropped["status"] == "dropped"
    released = await switchboard.call("message_release", {"request_id": accepted["request_id"]})
    assert released["status"] in ("accepted", "classified", "failed", "partial")
    again = await switchboard.call_raw("message_release", {"request_id": accepted["request_id"]})
    assert again.is_error and "not quarantined" in again.content[0].text

    async def processed() -> bool:
        row = await switchboard.call("message_get", {"request_id": accepted["request_id"]})
        return row["status"] not in ("accepted", "classified")

    await wait_until(processed, timeout=20, message="the released message was not processed")
    statuses = dict(
        await switchboard.context.pool.fetch("SELECT request_id::text, status FROM message_inbox")
    )
    assert statuses[second["request_id"]] == "dropped"


async def test_only_a_butler_running_the_channel_hands_its_messages_over(
    module_butler: ButlerFactory,
) -> None:
    switchboard = await _switchboard(module_butler)
    envelope = build_envelope("x", channel="telegram", provider="telegram", sender=str(OWNER))
    with speaking_as(butler("health")):
        refused = await switchboard.call_raw(
            "ingest_v1", {"envelope": envelope.model_dump(mode="json")}
        )
    assert refused.is_error
    assert "only for the channel modules it runs (none registered), not 'telegram'" in (
        refused.content[0].text
    )
    # The user's own token submits as the owner, whatever the channel says.
    mine = await switchboard.call("ingest_v1", {"envelope": envelope.model_dump(mode="json")})
    assert "quarantined" not in mine


async def test_the_webhook_checks_the_secret_and_hands_updates_over_once(
    module_butler: ButlerFactory,
) -> None:
    switchboard = await _switchboard(module_butler)
    async with telegram_api(TOKEN) as api:
        connector, bot, _telegram = await _connector(module_butler, switchboard, api.url)
        await bot.call(
            "setWebhook", {"url": "https://bot.example/telegram/webhook", "secret_token": "s3cret"}
        )
        app = Starlette(
            routes=[Route("/telegram/webhook", connector.webhook("s3cret"), methods=["POST"])]
        )
        async with served_asgi(app) as base:
            local = f"{base}/telegram/webhook"
            update = api.says("log 72 kg", user_id=OWNER)
            assert api.webhook is not None
            api.webhook["secret_token"] = "guessed"
            assert await api.deliver(via=local) == [401]
            api.webhook["secret_token"] = "s3cret"
            assert await api.deliver(via=local) == [200]
            api.updates.append(update)  # Telegram delivers it again
            assert await api.deliver(via=local) == [200]
        await bot.close()
    assert [text for _, text, _ in await _inbox(switchboard)] == ["log 72 kg"]


async def test_getupdates_beside_a_webhook_is_a_conflict() -> None:
    async with telegram_api(TOKEN) as api:
        bot = TelegramBot(TelegramConfig(api_base=api.url, poll_timeout_seconds=0), TOKEN, None)
        await bot.call("setWebhook", {"url": "https://bot.example/telegram/webhook"})
        with pytest.raises(Exception, match="409.*webhook is active"):
            await bot.get_updates(0)
        await bot.close()


async def test_the_bot_waits_out_retry_after(module_butler: ButlerFactory) -> None:
    async with telegram_api(TOKEN) as api:
        bot = TelegramBot(TelegramConfig(api_base=api.url, poll_timeout_seconds=0), TOKEN, None)
        api.rate_limit("getUpdates", retry_after=7)
        with pytest.raises(RetryAfter) as raised:
            await bot.get_updates(0)
        assert raised.value.seconds == 7  # what the poll loop sleeps
        api.rate_limit("sendMessage", retry_after=1)
        started = time.monotonic()
        await bot.send("4242", None, "hello")
        assert time.monotonic() - started >= 1.0
        assert [m["text"] for m in api.sent] == ["hello"]  # sent once, after the wait
        await bot.close()


async def test_a_reply_goes_on_the_thread_once_with_a_delivery_row(
    module_butler: ButlerFactory,
) -> None:
    async with telegram_api(TOKEN) as api:
        messenger = await module_butler(
            # A messenger without a switchboard names the owner itself.
            {"messenger": {"owner": {"telegram": [str(OWNER)]}}, "telegram": {"apiBase": api.url}},
            environ={"TELEGRAM_BOT_TOKEN": TOKEN},
        )
        request_id = str(uuid.uuid4())
        thread = {"chat_id": OWNER, "message_id": 10}
        arguments = {
            "channel": "telegram",
            "thread": thread,
            "text": "Logged.",
            "request_id": request_id,
        }
        api.rate_limit("sendMessage", retry_after=3600)  # longer than a send waits
        failed = await messenger.call("reply", arguments)
        assert failed["status"] == "failed" and "Too Many Requests" in failed["error"]
        sent = await messenger.call("reply", arguments)
        again = await messenger.call("reply", arguments)
    assert (sent["status"], sent["attempts"], sent["id"]) == ("sent", 2, failed["id"])
    assert again == sent  # already sent: not sent twice
    assert [(m["text"], m["reply_to_message"]["message_id"]) for m in api.sent] == [("Logged.", 10)]
    rows = await messenger.call("deliveries_list", {})
    assert [(d["request_id"], d["status"], d["attempts"]) for d in rows] == [
        (request_id, "sent", 2)
    ]
    assert "reply" not in await _session_tools(messenger)


async def test_a_reply_is_claimed_before_it_is_sent(module_butler: ButlerFactory) -> None:
    """Two calls for one message while the first send is on its way send it once; a
    claim left `sending` by this process is not sent again; one left by an earlier start
    (that process died mid-send) is sent again and counted as interrupted."""
    async with telegram_api(TOKEN) as api:
        messenger = await module_butler(
            {"messenger": {"owner": {"telegram": [str(OWNER)]}}, "telegram": {"apiBase": api.url}},
            environ={"TELEGRAM_BOT_TOKEN": TOKEN},
        )
        pool = messenger.context.pool

        def arguments(request_id: str) -> dict[str, Any]:
            thread = {"chat_id": OWNER, "message_id": 20}
            return {"channel": "telegram", "thread": thread, "text": "Ok."} | {
                "request_id": request_id
            }

        together = arguments(str(uuid.uuid4()))
        api.send_delay = 0.5
        first, second = await asyncio.gather(
            messenger.call("reply", together), messenger.call("reply", together)
        )
        api.send_delay = 0.0
        assert sorted([first["status"], second["status"]]) == ["sending", "sent"]
        assert len(api.sent) == 1
        assert (await messenger.call("reply", together))["status"] == "sent"

        cut_off = arguments(str(uuid.uuid4()))
        sent = await messenger.call("reply", cut_off)
        # As a send in progress in this process leaves the row: not sent again.
        await pool.execute(
            "UPDATE deliveries SET status = 'sending', claimed_at = clock_timestamp() "
            "WHERE request_id = $1::uuid",
            cut_off["request_id"],
        )
        in_progress = await messenger.call("reply", cut_off)
        assert (in_progress["status"], len(api.sent)) == ("sending", 2)
        # As a process of an earlier start left it when it died mid-send.
        await pool.execute(
            "UPDATE deliveries SET claimed_by = claimed_by - 1 WHERE request_id = $1::uuid",
            cut_off["request_id"],
        )
        again = await messenger.call("reply", cut_off)
    assert (again["id"], again["status"], again["attempts"], again["interrupted"]) == (
        sent["id"], "sent", 2, 1
    )  # fmt: skip
    assert [m["reply_to_message"]["message_id"] for m in api.sent] == [20, 20, 20]


async def _session_tools(butler: ModuleButler) -> set[str]:
    from butlers.auth.identity import session
    from butlers.llm.toolbox import speaking_as

    with speaking_as(session("s-1")):
        return await butler.tool_names()
