"""The `telegram` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
import logging
from collections import deque
from typing import Annotated, Any

import httpx2 as httpx
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.jsonutil import AnyJson, to_json
from butlers.modules.base import Module, ModuleConfig, ModuleContext, ModuleError, tool_meta
from butlers.modules.channels import ChannelError
from butlers.spec import ENV_NAME_PATTERN
from butlers.tooling import tool

NAME = "telegram"
log = logging.getLogger(__name__)
POLL_BACKOFF = 1.0
MAX_POLL_BACKOFF = 60.0
# Sends go through the messenger's guard and delivery log, never around them.
NO_MESSENGER = (
    "telegram_send needs the messenger module on this butler (owner destinations, "
    "approvals for other chats, the delivery log); add `messenger` to spec.modules"
)
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]


class TelegramConfig(ModuleConfig):
    token_env: EnvName = "TELEGRAM_BOT_TOKEN"
    chat_id_env: EnvName | None = "TELEGRAM_CHAT_ID"
    api_base: Annotated[str, Field(pattern=r"^https?://")] = "https://api.telegram.org"
    timeout_seconds: Annotated[float, Field(gt=0, le=120)] = 10.0
    poll: bool = False
    poll_timeout_seconds: Annotated[int, Field(ge=0, le=50)] = 20


class TelegramBot:
    """The Bot API over HTTP; also the messenger's `telegram` channel."""

    def __init__(self, config: TelegramConfig, token: str, chat_id: str | None) -> None:
        self.config = config
        self.chat_id = chat_id
        self._base = f"{config.api_base.rstrip('/')}/bot{token}"
        self._http = httpx.AsyncClient(timeout=config.timeout_seconds)
        self.updates: deque[dict[str, Any]] = deque(maxlen=200)
        self._offset: int | None = None

    async def call(self, method: str, payload: dict[str, Any], wait: float | None = None) -> Any:
        try:
            response = await self._http.post(
                f"{self._base}/{method}",
                json=payload,
                timeout=wait or self.config.timeout_seconds,
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ChannelError(f"telegram {method}: {exc.__class__.__name__}: {exc}") from None
        if not body.get("ok"):
            raise ChannelError(
                f"telegram {method} failed ({response.status_code}): {body.get('description')}"
            )
        return body["result"]

    async def send(
        self,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        thread: dict[str, Any] | None = None,
    ) -> str:
        thread = thread or {}
        chat = recipient or (str(thread["chat_id"]) if thread.get("chat_id") else self.chat_id)
        if not chat:
            raise ChannelError(
                f"no chat: pass a recipient or set {self.config.chat_id_env} for the default chat"
            )
        text = f"{subject}\n\n{body}" if subject else body
        payload: dict[str, Any] = {"chat_id": chat, "text": text}
        if thread.get("message_id"):
            payload["reply_to_message_id"] = int(thread["message_id"])
        result = await self.call("sendMessage", payload)
        return str(result["message_id"])

    async def poll_once(self) -> int:
        wait = self.config.poll_timeout_seconds
        payload: dict[str, Any] = {"timeout": wait}
        if self._offset is not None:
            payload["offset"] = self._offset
        updates = await self.call("getUpdates", payload, wait=wait + self.config.timeout_seconds)
        for update in updates:
            self._offset = int(update["update_id"]) + 1
            self.updates.append(update)
        return len(updates)

    async def close(self) -> None:
        await self._http.aclose()


class TelegramModule(Module):
    name = NAME
    config_model = TelegramConfig

    def __init__(self) -> None:
        self.bot: TelegramBot | None = None
        self._poller: asyncio.Task[None] | None = None

    async def start(self, ctx: ModuleContext) -> None:
        config: TelegramConfig = ctx.config
        token = ctx.credential(config.token_env)
        chat_id = ctx.optional_credential(config.chat_id_env) if config.chat_id_env else None
        self.bot = TelegramBot(config, token, chat_id or None)
        try:
            me = await self.bot.call("getMe", {})
        except ChannelError as exc:
            raise ModuleError("credentials", f"telegram rejected the bot token: {exc}") from None
        log.info("telegram bot @%s ready", me.get("username"))
        ctx.services.channels[NAME] = self.bot
        if config.poll:
            self._poller = asyncio.create_task(self._poll_forever(), name="telegram-poll")

    async def _poll_forever(self) -> None:
        """Poll until stopped: API failures are warnings, anything else is logged with its
        traceback; both back off and poll again (the task never ends on its own)."""
        assert self.bot is not None
        backoff = POLL_BACKOFF
        while True:
            try:
                received = await self.bot.poll_once()
            except ChannelError as exc:
                log.warning("telegram polling: %s", exc)
                await asyncio.sleep(self.bot.config.timeout_seconds)
                continue
            except Exception:
                log.exception("telegram polling failed; polling again in %.0f s", backoff)
                await asyncio.sleep(backoff)
                backoff = min(MAX_POLL_BACKOFF, backoff * 2)
                continue
            backoff = POLL_BACKOFF
            if not received and self.bot.config.poll_timeout_seconds == 0:
                await asyncio.sleep(1.0)  # short polling: do not hammer the API

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        bot = self.bot
        assert bot is not None
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
            """Recent incoming updates (when polling is on, see config `poll`)."""
            return to_json(list(bot.updates)[-limit:])

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self.bot is not None:
            await self.bot.close()
