"""A stand-in of the Telegram Bot API for tests (Telegram's servers cannot be reached).

It follows the documented methods and answers, for one bot token: `getMe`,
`sendMessage` (with `reply_parameters`/`reply_to_message_id`), `getUpdates` with
`offset` (confirming every update below it) and `timeout` (long polling: the call
waits for an update), `setWebhook` (with `secret_token`) / `deleteWebhook` (while a
webhook is set `getUpdates` answers 409, as does a second concurrent `getUpdates`),
and `429 Too Many Requests` with `parameters.retry_after` when a test asks for it.
With a webhook set, `deliver()` posts pending updates to it as Telegram does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.serving import served_asgi

BOT = {"id": 7000001, "is_bot": True, "first_name": "Butlers", "username": "butlers_test_bot"}


def _error(code: int, description: str, **parameters: Any) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, code)


@dataclass
class TelegramApi:
    token: str
    url: str = ""
    updates: list[dict[str, Any]] = field(default_factory=list)  # not yet confirmed
    sent: list[dict[str, Any]] = field(default_factory=list)  # messages the bot sent
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    webhook: dict[str, Any] | None = None
    # method -> [retry_after, times left]: answered 429 that many times.
    limits: dict[str, list[int]] = field(default_factory=dict)
    send_delay: float = 0.0  # seconds `sendMessage` takes to answer (a slow network)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _messages: Any = field(default_factory=lambda: itertools.count(1001))
    _polling: bool = False
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    # message_id -> futures of `reply` callers waiting for the bot's answer to it.
    _waiting: dict[int, list[asyncio.Future[dict[str, Any]]]] = field(default_factory=dict)

    # -- what a test does --------------------------------------------------------

    def says(
        self,
        text: str | None,
        *,
        user_id: int,
        chat_id: int | None = None,
        first_name: str = "Ada",
        **extra: Any,
    ) -> dict[str, Any]:
        """A person writes to the bot; returns the update (its `message`)."""
        message = {
            "message_id": next(self._messages),
            "date": int(time.time()),
            "chat": {"id": chat_id or user_id, "type": "private", "first_name": first_name},
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            **({"text": text} if text is not None else {}),
            **extra,
        }
        return self._push({"message": message})

    def edits(self, message: dict[str, Any], text: str) -> dict[str, Any]:
        edited = dict(message, text=text, edit_date=int(time.time()) + 1)
        return self._push({"edited_message": edited})

    def rate_limit(self, method: str, retry_after: int, times: int = 1) -> None:
        self.limits[method] = [retry_after, times]

    def _push(self, body: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._ids), **body}
        self.updates.append(update)
        self._arrived.set()
        return update

    async def deliver(self, via: str | None = None, timeout: float = 30.0) -> list[int]:
        """Post every pending update to the webhook (as Telegram does); an update the
        webhook answers with anything but 2xx stays pending. The HTTP statuses. `via`
        is where the webhook's public URL leads here (what an ingress would do)."""
        assert self.webhook is not None, "no webhook is set"
        statuses = []
        headers = {}
        if self.webhook.get("secret_token"):
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook["secret_token"]
        async with httpx.AsyncClient(timeout=timeout) as client:
            for update in list(self.updates):
                target = via or self.webhook["url"]
                response = await client.post(target, json=update, headers=headers)
                statuses.append(response.status_code)
                if 200 <= response.status_code < 300:
                    self.updates.remove(update)
        return statuses

    def replies_to(self, message_id: int) -> list[dict[str, Any]]:
        return [
            m
            for m in self.sent
            if (m.get("reply_to_message") or {}).get("message_id") == message_id
        ]

    async def reply(self, message_id: int, timeout: float) -> dict[str, Any]:
        """The bot's first reply to `message_id`, waited for (woken by `sendMessage`, not
        polled: a benchmark's waiters must not take the CPU it measures) up to `timeout`
        seconds (TimeoutError past it)."""
        replies = self.replies_to(message_id)
        if replies:
            return replies[0]
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(message_id, [])
        waiting.append(future)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            if future in waiting:
                waiting.remove(future)
            if not waiting:
                self._waiting.pop(message_id, None)

    # -- the Bot API ------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/bot{token}/{method}", self._method, methods=["POST", "GET"])]
        )

    async def _method(self, request: Request) -> JSONResponse:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        payload = await request.json() if await request.body() else {}
        name = request.path_params["method"]
        self.calls.append((name, payload))
        limit = self.limits.get(name)
        if limit and limit[1] > 0:
            limit[1] -= 1
            return _error(429, f"Too Many Requests: retry after {limit[0]}", retry_after=limit[0])
        handler = getattr(self, f"_{name}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        return await handler(payload)

    async def _getMe(self, _payload: dict[str, Any]) -> JSONResponse:
        return JSONResponse({"ok": True, "result": BOT})

    async def _sendMessage(self, payload: dict[str, Any]) -> JSONResponse:
        if not payload.get("chat_id") or not payload.get("text"):
            return _error(400, "Bad Request: message text is empty")
        message: dict[str, Any] = {
            "message_id": next(self._messages),
            "date": int(time.time()),
            "chat": {"id": int(payload["chat_id"]), "type": "private"},
            "from": BOT,
            "text": payload["text"],
        }
        reply_id = (payload.get("reply_parameters") or {}).get("message_id") or payload.get(
            "reply_to_message_id"
        )
        if reply_id is not None:
            message["reply_to_message"] = {"message_id": int(reply_id)}
        self.sent.append(message)
        for future in self._waiting.pop(int(reply_id), []) if reply_id is not None else []:
            if not future.done():
                future.set_result(message)
        await asyncio.sleep(self.send_delay)  # sent, the answer still on its way
        return JSONResponse({"ok": True, "result": message})

    async def _getUpdates(self, payload: dict[str, Any]) -> JSONResponse:
        if self.webhook is not None:
            return _error(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        if self._polling:
            return _error(
                409,
                "Conflict: terminated by other getUpdates request; make sure that only "
                "one bot instance is running",
            )
        offset = int(payload.get("offset") or 0)
        if offset:
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        self._polling = True
        try:
            deadline = time.monotonic() + float(payload.get("timeout") or 0)
            while not self.updates and time.monotonic() < deadline:
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), deadline - time.monotonic())
        finally:
            self._polling = False
        limit = int(payload.get("limit") or 100)
        return JSONResponse({"ok": True, "result": self.updates[:limit]})

    async def _setWebhook(self, payload: dict[str, Any]) -> JSONResponse:
        url = str(payload.get("url") or "")
        if url and not url.startswith("https://"):
            return _error(400, "Bad Request: bad webhook: An HTTPS URL must be provided")
        self.webhook = dict(payload) if url else None
        return JSONResponse({"ok": True, "result": True, "description": "Webhook was set"})

    async def _deleteWebhook(self, payload: dict[str, Any]) -> JSONResponse:
        self.webhook = None
        if payload.get("drop_pending_updates"):
            self.updates.clear()
        return JSONResponse({"ok": True, "result": True, "description": "Webhook was deleted"})


@contextlib.asynccontextmanager
async def telegram_api(token: str, host: str = "127.0.0.1") -> AsyncIterator[TelegramApi]:
    """The stand-in served on a free port of `host` (`api.url`, on loopback, is its
    `apiBase`)."""
    api = TelegramApi(token)
    async with served_asgi(api.app(), host=host) as url:
        api.url = url
        yield api
