"""The `telegram` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
import contextlib
import logging
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from urllib.request import (  # type: ignore[attr-defined]
    getproxies_environment,
    proxy_bypass_environment,  # not in typeshed
)

import httpx2 as httpx
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, model_validator

from butlers import jsoncodec
from butlers.http1 import Http1Pool, HttpFailure
from butlers.jsonutil import AnyJson, to_json
from butlers.mcp_clients import McpClient
from butlers.modules.base import (
    Module,
    ModuleConfig,
    ModuleContext,
    ModuleError,
    migration_chain,
    tool_meta,
)
from butlers.modules.channels import ChannelError
from butlers.modules.telegram.connector import (
    Connector,
    RetryAfter,
    Submit,
    switchboard_submitter,
)
from butlers.modules.telegram.store import TelegramStore
from butlers.spec import ENV_NAME_PATTERN
from butlers.tooling import tool

NAME = "telegram"
WEBHOOK_PATH = "/telegram/webhook"
log = logging.getLogger(__name__)
POLL_BACKOFF = 1.0
MAX_POLL_BACKOFF = 60.0
# Sends go through the messenger's guard and delivery log, never around them.
NO_MESSENGER = (
    "telegram_send needs the messenger module on this butler (owner destinations, "
    "approvals for other chats, the delivery log); add `messenger` to spec.modules"
)
MAX_RETRY_AFTER = 30.0  # a send waits out at most this much of a 429's retry_after
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]


class TelegramConfig(ModuleConfig):
    token_env: EnvName = "TELEGRAM_BOT_TOKEN"
    chat_id_env: EnvName | None = "TELEGRAM_CHAT_ID"
    api_base: Annotated[str, Field(pattern=r"^https?://")] = "https://api.telegram.org"
    # A variable that, when set, overrides `api_base` (a self-hosted Bot API server).
    api_base_env: EnvName | None = "TELEGRAM_API_BASE"
    timeout_seconds: Annotated[float, Field(gt=0, le=120)] = 10.0
    # Hand every message people send the bot to the switchboard (the owner's start
    # work; anyone else's wait in quarantine).
    inbound: bool = False
    # `poll`: long polling from the persisted offset; `webhook`: Telegram posts each
    # update to `webhook_url` (ending in /telegram/webhook, reaching this butler),
    # with the secret from `webhook_secret_env` in its header.
    mode: Literal["poll", "webhook"] = "poll"
    poll_timeout_seconds: Annotated[int, Field(ge=0, le=50)] = 20
    webhook_url: Annotated[str | None, Field(pattern=r"^https://.+/telegram/webhook$")] = None
    webhook_secret_env: EnvName = "TELEGRAM_WEBHOOK_SECRET"

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> "TelegramConfig":
        if self.inbound and self.mode == "webhook" and not self.webhook_url:
            raise ValueError(
                "mode webhook needs webhookUrl (https://<public host>/telegram/webhook)"
            )
        return self

    def env_names(self) -> set[str]:
        names = super().env_names()
        if not (self.inbound and self.mode == "webhook"):
            names.discard(self.webhook_secret_env)
        return names


class TelegramBot:
    """The Bot API over HTTP; also the messenger's `telegram` channel.

    Calls go through the small HTTP/1.1 client of the MCP path (`http1.Http1Pool`: about
    a millisecond less Python work per call than httpx, which counts when a reply per
    message is sent) unless a proxy from the environment that only httpx can use
    applies to the API's host (an https or SOCKS proxy)."""

    def __init__(
        self, config: TelegramConfig, token: str, chat_id: str | None, api_base: str | None = None
    ) -> None:
        self.config = config
        self._http: httpx.AsyncClient | None = None  # made when a proxy needs it
        self._pool = Http1Pool()
        self.use(token, chat_id, api_base)

    def use(self, token: str, chat_id: str | None, api_base: str | None = None) -> None:
        """Call the API with these from the next request on (a changed token)."""
        self.chat_id = chat_id
        self._token = token
        self._base = f"{(api_base or self.config.api_base).rstrip('/')}/bot{token}"
        self._direct = _direct(self._base)

    async def call(self, method: str, payload: dict[str, Any], wait: float | None = None) -> Any:
        url, timeout = f"{self._base}/{method}", wait or self.config.timeout_seconds
        try:
            if self._direct:
                answer = await self._pool.request(
                    "POST", url, JSON_HEADERS, jsoncodec.dumps(payload), timeout
                )
                status, body = answer.status, jsoncodec.loads(answer.body)
            else:
                if self._http is None:
                    self._http = httpx.AsyncClient(timeout=self.config.timeout_seconds)
                response = await self._http.post(url, json=payload, timeout=timeout)
                status, body = response.status_code, response.json()
        except (httpx.HTTPError, HttpFailure, ValueError) as exc:
            # The URL holds the bot token: an error names the method, never the URL.
            reason = f"{exc.__class__.__name__}: {exc}".replace(self._token, "<token>")
            raise ChannelError(f"telegram {method}: {reason}") from None
        if not isinstance(body, dict) or not body.get("ok"):
            body = body if isinstance(body, dict) else {}
            message = f"telegram {method} failed ({status}): {body.get('description')}"
            parameters = body.get("parameters") or {}
            retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
            if status == 429 and isinstance(retry_after, int | float):
                raise RetryAfter(message, float(retry_after))
            raise ChannelError(message)
        return body["result"]

    async def send(
        self,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        thread: dict[str, Any] | None = None,
    ) -> str:
        chat = recipient or (thread or {}).get("chat_id") or self.chat_id
        if not chat:
            raise ChannelError(
                f"no chat: pass a recipient or set {self.config.chat_id_env} for the default chat"
            )
        text = f"{subject}\n\n{body}" if subject else body
        payload: dict[str, Any] = {"chat_id": chat, "text": text[:4096]}
        if thread and thread.get("message_id") is not None:
            payload["reply_parameters"] = {
                "message_id": thread["message_id"],
                "allow_sending_without_reply": True,
            }
        for _ in range(3):
            try:
                result = await self.call("sendMessage", payload)
                break
            except RetryAfter as exc:
                if exc.seconds > MAX_RETRY_AFTER:
                    raise
                log.info("telegram asked to wait %.0f s before sending", exc.seconds)
                await asyncio.sleep(exc.seconds)
        else:
            raise ChannelError("telegram sendMessage: still rate-limited after 3 waits")
        return str(result["message_id"])

    async def get_updates(self, offset: int) -> list[dict[str, Any]]:
        wait = self.config.poll_timeout_seconds
        payload: dict[str, Any] = {
            "offset": offset,
            "timeout": wait,
            "allowed_updates": ["message", "edited_message"],
        }
        updates = await self.call("getUpdates", payload, wait=wait + self.config.timeout_seconds)
        if not isinstance(updates, list) or not all(
            isinstance(u, dict) and isinstance(u.get("update_id"), int) for u in updates
        ):
            raise ChannelError(f"telegram getUpdates answered {str(updates)[:200]!r}, not updates")
        return updates

    async def close(self) -> None:
        await self._pool.aclose()
        if self._http is not None:
            await self._http.aclose()


class TelegramModule(Module):
    name = NAME
    config_model = TelegramConfig
    chain = migration_chain(NAME, __file__)

    def __init__(self) -> None:
        self.bot: TelegramBot | None = None
        self.connector: Connector | None = None
        self._store: TelegramStore | None = None
        self._poller: asyncio.Task[None] | None = None
        self._clients: McpClient | None = None
        self._submit: Submit | None = None

    async def start(self, ctx: ModuleContext) -> None:
        config: TelegramConfig = ctx.config
        self.bot = TelegramBot(config, *_login(ctx, config))
        try:
            me = await self.bot.call("getMe", {})
        except ChannelError as exc:
            raise ModuleError("credentials", f"telegram rejected the bot token: {exc}") from None
        username = str(me.get("username") or me.get("id"))
        log.info("telegram bot @%s ready", username)
        ctx.services.channels[NAME] = self.bot
        self._store = TelegramStore(ctx.pool, username)
        if not config.inbound:
            return
        url = ctx.services.switchboard_url
        if not url:
            raise ModuleError(
                "config",
                "telegram inbound needs the switchboard's URL (BUTLERS_SWITCHBOARD_URL) "
                "to hand messages over",
            )
        submit, self._clients = switchboard_submitter(url, ctx.butler.token, ctx.butler.name)
        self._submit = submit
        await self._connect(ctx, username)

    async def _connect(self, ctx: ModuleContext, username: str) -> None:
        """The inbound connector of bot `username` from its persisted cursor: polling
        started, or the webhook set (with the secret as it resolves now)."""
        config: TelegramConfig = ctx.config
        assert self.bot is not None and self._submit is not None
        self._store = TelegramStore(ctx.pool, username)
        self.connector = Connector(self._store, self._submit, username)
        await self._store.cursor(config.mode)
        if config.mode == "webhook":
            secret = ctx.credential(config.webhook_secret_env)
            ctx.services.webhooks[WEBHOOK_PATH] = self.connector.webhook(secret)
            try:
                await self.bot.call(
                    "setWebhook",
                    {
                        "url": config.webhook_url,
                        "secret_token": secret,
                        "allowed_updates": ["message", "edited_message"],
                    },
                )
            except ChannelError as exc:
                raise ModuleError("startup", f"telegram refused the webhook: {exc}") from None
            return
        try:  # long polling and a webhook exclude each other (getUpdates answers 409)
            await self.bot.call("deleteWebhook", {"drop_pending_updates": False})
        except ChannelError as exc:
            raise ModuleError("startup", f"telegram could not leave webhook mode: {exc}") from None
        self._poller = asyncio.create_task(self._poll_forever(), name="telegram-poll")

    async def credentials_changed(self, ctx: ModuleContext, names: frozenset[str]) -> None:
        """A changed token (chat, API base, webhook secret) applies without a restart: the
        new token is checked with `getMe` first (a refused one leaves the current in use,
        with a warning), then sends use it and the connector starts again from its
        persisted cursor (the same bot's, or the new bot's own)."""
        config: TelegramConfig = ctx.config
        used = {config.token_env, config.chat_id_env, config.api_base_env}
        if config.inbound and config.mode == "webhook":
            used.add(config.webhook_secret_env)
        touched = names & {name for name in used if name}
        if self.bot is None or not touched:
            return
        try:
            login = _login(ctx, config)
        except ModuleError as exc:
            log.warning("telegram: keeps its current bot token: %s", exc)
            return
        probe = TelegramBot(config, *login)
        try:
            me = await probe.call("getMe", {})
        except ChannelError as exc:
            log.warning("telegram: keeps its current bot token, the changed one fails: %s", exc)
            await self._note(f"the changed bot token is not used: {exc}")
            return
        finally:
            await probe.close()
        self.bot.use(*login)
        log.info("telegram: uses the changed %s", ", ".join(sorted(touched)))
        if self.connector is None:
            return
        await self._stop_polling()
        try:
            await self._connect(ctx, str(me.get("username") or me.get("id")))
        except ModuleError as exc:  # the next change may fix it; polling goes on meanwhile
            log.warning("telegram: %s", exc)
            await self._note(str(exc))
            if config.mode == "poll" and self._poller is None:
                self._poller = asyncio.create_task(self._poll_forever(), name="telegram-poll")

    async def _stop_polling(self) -> None:
        """Polling stopped (a batch being handed over comes again: the cursor moves only
        past what the switchboard took)."""
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None

    async def _poll_forever(self) -> None:
        """Poll until stopped: API failures are warnings (a 429 waits its retry_after),
        anything else is logged with its traceback; both back off and poll again."""
        assert self.bot is not None and self._store is not None and self.connector is not None
        backoff = POLL_BACKOFF
        while True:
            try:
                received = await self.connector.poll_once(self.bot)
            except RetryAfter as exc:
                log.warning("telegram polling: %s; waiting %.0f s", exc, exc.seconds)
                await self._note(str(exc))
                await asyncio.sleep(exc.seconds)
                continue
            except ChannelError as exc:
                log.warning("telegram polling: %s; polling again in %.0f s", exc, backoff)
                await self._note(str(exc))
            except Exception as exc:
                log.exception("telegram polling failed; polling again in %.0f s", backoff)
                await self._note(f"{exc.__class__.__name__}: {exc}")
            else:
                backoff = POLL_BACKOFF
                if not received and self.bot.config.poll_timeout_seconds == 0:
                    await asyncio.sleep(1.0)  # short polling: do not hammer the API
                continue
            await asyncio.sleep(backoff)
            backoff = min(MAX_POLL_BACKOFF, backoff * 2)

    async def _note(self, error: str) -> None:
        if self._store is None:
            return
        with contextlib.suppress(Exception):  # the database may be what failed
            await self._store.polled(error[:1000])

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        bot = self.bot
        assert bot is not None and self._store is not None
        meta = tool_meta(NAME)

        @tool(mcp, meta=meta)
        async def telegram_send(
            text: Annotated[str, Field(min_length=1, max_length=4096)], chat_id: str | None = None
        ) -> AnyJson:
            """Send a Telegram message (to the owner's default chat unless `chat_id` is
            given). Through the messenger: a chat the owner has not allowed is held for
            their approval, and the attempt is in its delivery log."""
            outbound = ctx.services.outbound
            if outbound is None:
                raise ToolError(NO_MESSENGER)
            row = await outbound.send(NAME, chat_id, None, text, tool="telegram_send")
            if row.status != "sent":
                raise ToolError(
                    f"telegram message not sent ({row.status}, delivery {row.id}): {row.error}"
                )
            return {
                "message_id": row.provider_message_id,
                "chat_id": row.recipient or bot.chat_id,
                "delivery_id": str(row.id),
            }

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def telegram_updates(limit: Annotated[int, Field(ge=1, le=200)] = 20) -> AnyJson:
            """Updates the inbound connector handed to the switchboard (or skipped), newest
            first, with the cursor and the last poll and error (config `inbound`)."""
            store = self._store  # the current bot's (its token may have changed)
            assert store is not None
            cursor = await store.cursor()
            return {"cursor": to_json(cursor), "updates": to_json(await store.recent(limit))}

    async def stop(self) -> None:
        await self._stop_polling()
        if self._clients is not None:
            await self._clients.close()
        if self.bot is not None:
            await self.bot.close()


def _direct(base: str) -> bool:
    """Whether `Http1Pool` reaches the API at `base` as httpx would: no proxy from the
    environment applies, or only a plain HTTP proxy for an http URL (which it honours)."""
    parts = urlsplit(base)
    proxies = getproxies_environment()
    if not proxies or proxy_bypass_environment(parts.netloc, proxies):
        return True
    if parts.scheme == "http" and proxies.get("http"):
        return str(proxies["http"]).startswith("http://")
    return not (proxies.get(parts.scheme) or proxies.get("all"))


def _login(ctx: ModuleContext, config: TelegramConfig) -> tuple[str, str | None, str | None]:
    """(token, default chat, API base) as they resolve now (store, shared, environment)."""
    token = ctx.credential(config.token_env)
    chat_id = ctx.optional_credential(config.chat_id_env) if config.chat_id_env else None
    api_base = ctx.optional_credential(config.api_base_env) if config.api_base_env else None
    if api_base and not api_base.startswith(("http://", "https://")):
        raise ModuleError("config", f"{config.api_base_env}={api_base!r} is not an http(s) URL")
    return token, chat_id or None, api_base or None
