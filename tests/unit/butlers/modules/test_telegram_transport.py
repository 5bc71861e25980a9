"""How the telegram module reaches the Bot API: the small HTTP/1.1 client unless a proxy
only httpx can use applies, and never the bot token in an error."""

from __future__ import annotations

import pytest

from butlers.modules.channels import ChannelError
from butlers.modules.telegram.module import TelegramBot, TelegramConfig, _direct

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_without_a_proxy_every_api_base_is_reached_directly() -> None:
    assert _direct("https://api.telegram.org/bot1:x")
    assert _direct("http://127.0.0.1:8081/bot1:x")


def test_an_https_proxy_is_left_to_httpx_unless_the_host_bypasses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.internal:3128")
    assert not _direct("https://api.telegram.org/bot1:x")
    monkeypatch.setenv("no_proxy", "api.telegram.org")
    assert _direct("https://api.telegram.org/bot1:x")


def test_a_plain_http_proxy_is_honoured_by_the_small_client_but_socks_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("http_proxy", "http://proxy.internal:3128")
    assert _direct("http://bot-api.internal:8081/bot1:x")
    monkeypatch.setenv("http_proxy", "socks5://proxy.internal:1080")
    assert not _direct("http://bot-api.internal:8081/bot1:x")
    monkeypatch.delenv("http_proxy")
    monkeypatch.setenv("all_proxy", "socks5://proxy.internal:1080")
    assert not _direct("http://bot-api.internal:8081/bot1:x")


async def test_an_unreachable_api_is_a_channel_error_without_the_token() -> None:
    token = "5550000:secret-token-value"
    bot = TelegramBot(TelegramConfig(timeout_seconds=2), token, None, "http://127.0.0.1:9")
    try:
        with pytest.raises(ChannelError, match="telegram getMe: HttpFailure") as failure:
            await bot.call("getMe", {})
    finally:
        await bot.close()
    assert token not in str(failure.value)
    assert "<token>" in str(failure.value)
