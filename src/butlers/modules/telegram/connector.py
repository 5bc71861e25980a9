"""The inbound connector: Telegram updates handed to the switchboard, at least once.

Long polling (`getUpdates` from the persisted offset) or webhook deliveries both end in
`hand_over`: the update becomes an IngestEnvelopeV1, the switchboard's `ingest_v1`
accepts it (asked again with back-off while it cannot be reached), and only then is
the update recorded and the cursor moved past it. A restart repeats at most the
update in flight, which the switchboard answers as a duplicate (the channel's own id
is its idempotency key): nothing is lost, nothing runs twice.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed
from butlers.modules.channels import ChannelError
from butlers.modules.telegram.inbound import envelope_of
from butlers.modules.telegram.store import TelegramStore

log = logging.getLogger(__name__)
# A hand-over the switchboard cannot take yet is asked again after these seconds,
# doubling up to the last.
HANDOVER_BACKOFF = (0.2, 10.0)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
WEBHOOK_DEADLINE = 50.0  # a webhook delivery not handed over by then is answered 503
# Refusals that asking again cannot fix: the update is recorded as skipped with why.
PERMANENT = ("invalid IngestEnvelopeV1", "conflicts with message")

Submit = Callable[[dict[str, Any]], Awaitable[Any]]


class UpdateSource(Protocol):
    async def get_updates(self, offset: int) -> list[dict[str, Any]]: ...


class RetryAfter(ChannelError):
    """The Bot API asked to wait (`429` with `parameters.retry_after`)."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


def switchboard_submitter(url: str, token: str | None, butler: str) -> tuple[Submit, McpClient]:
    """`ingest_v1` on the switchboard at `url`, with this butler's own token."""
    clients = McpClient(
        {"Authorization": f"Bearer {token}"} if token else None,
        timeout=30.0,
        client_name=f"butlers-telegram {butler}",
    )

    async def submit(envelope: dict[str, Any]) -> Any:
        result = await clients.call_tool(url, "ingest_v1", {"envelope": envelope}, idempotent=True)
        return result.data

    return submit, clients


class Connector:
    def __init__(self, store: TelegramStore, submit: Submit, bot_username: str) -> None:
        self._store = store
        self._submit = submit
        self._username = bot_username
        self.handed = 0  # updates handed over (or skipped) since start

    async def poll_once(self, bot: UpdateSource) -> int:
        """One long poll from the persisted offset. The batch's updates are handed over
        at once, then recorded together (one transaction): the cursor moves only past
        updates the switchboard has taken (a crash in between repeats them, as
        duplicates)."""
        cursor = await self._store.cursor()
        updates = await bot.get_updates(cursor.next_offset)
        todo = sorted(
            (u for u in updates if int(u["update_id"]) >= cursor.next_offset),
            key=lambda u: int(u["update_id"]),
        )
        if todo:
            await self._store.receiving(len(todo))
        taken = await asyncio.gather(*(self._take(u, None) for u in todo))
        await self._store.handed_batch(
            [(int(u["update_id"]), fields) for u, (fields, _) in zip(todo, taken, strict=True)]
        )
        self.handed += len(todo)
        await self._store.polled(None)
        return len(updates)

    async def hand_over(self, update: dict[str, Any], deadline: float | None = None) -> str:
        """Hand one update over and move the cursor past it; its outcome (`accepted`,
        `quarantined`, `duplicate`, `skipped`). Raises TimeoutError past `deadline`
        (a monotonic time) with nothing recorded."""
        fields, outcome = await self._take(update, deadline)
        await self._store.handed(int(update["update_id"]), **fields)
        self.handed += 1
        if deadline is not None:  # a webhook delivery: the connector's sign of life
            await self._store.polled(None, mode="webhook")
        return outcome

    async def _take(
        self, update: dict[str, Any], deadline: float | None
    ) -> tuple[dict[str, Any], str]:
        """The switchboard takes the update (asked again while it cannot); what to
        record of it, and its outcome."""
        update_id = int(update["update_id"])
        envelope = envelope_of(update, self._username)
        if envelope is None:
            kinds = ", ".join(sorted(k for k in update if k != "update_id")) or "nothing"
            skipped = {
                "event_id": None,
                "chat_id": None,
                "sender": None,
                "kind": "skipped",
                "request_id": None,
                "outcome": "skipped",
                "detail": f"not a person's message ({kinds})",
            }
            return skipped, "skipped"
        event, raw = envelope["event"], envelope["payload"]["raw"]
        answer, refusal = await self._submit_until_taken(envelope, update_id, deadline)
        detail: str | None
        if refusal is not None:
            outcome, request_id, detail = "skipped", None, refusal
        else:
            data = answer if isinstance(answer, dict) else {}
            request_id = uuid.UUID(str(data["request_id"])) if data.get("request_id") else None
            outcome = (
                "quarantined"
                if data.get("quarantined")
                else "duplicate"
                if data.get("duplicate")
                else "accepted"
            )
            detail = data.get("quarantined")
        fields = {
            "event_id": event["external_event_id"],
            "chat_id": event["external_thread_id"],
            "sender": envelope["sender"]["identity"],
            "kind": "edit" if raw["edit_of"] else "message",
            "request_id": request_id,
            "outcome": outcome,
            "detail": detail,
        }
        return fields, outcome

    async def _submit_until_taken(
        self, envelope: dict[str, Any], update_id: int, deadline: float | None
    ) -> tuple[Any, str | None]:
        delay = HANDOVER_BACKOFF[0]
        while True:
            try:
                return await self._submit(envelope), None
            except ToolFailed as exc:
                if any(mark in str(exc) for mark in PERMANENT):
                    log.error("telegram update %d refused by the switchboard: %s", update_id, exc)
                    return None, f"refused by the switchboard: {exc}"[:1000]
                log.warning("telegram update %d not taken yet: %s", update_id, exc)
            except (EndpointUnavailable, McpError, OSError, TimeoutError) as exc:
                log.info("switchboard not reachable for update %d: %s", update_id, exc)
            if deadline is not None and time.monotonic() + delay > deadline:
                raise TimeoutError(f"the switchboard did not take update {update_id} in time")
            await asyncio.sleep(delay)
            delay = min(HANDOVER_BACKOFF[1], delay * 2)

    def webhook(self, secret: str) -> Callable[[Request], Awaitable[Response]]:
        """The webhook endpoint: Telegram's secret-token header checked in constant
        time, then the update handed over before answering (a 503 makes Telegram
        deliver it again later)."""
        expected = secret.encode()

        async def receive(request: Request) -> Response:
            given = request.headers.get(SECRET_HEADER, "").encode()
            if not hmac.compare_digest(given, expected):
                return JSONResponse({"ok": False, "error": "bad secret token"}, 401)
            try:
                update = await request.json()
                update_id = int(update["update_id"])
            except (ValueError, KeyError, TypeError):
                return JSONResponse({"ok": False, "error": "not a Telegram update"}, 400)
            if await self._store.seen(update_id):
                return JSONResponse({"ok": True, "duplicate": True})
            try:
                outcome = await self.hand_over(update, time.monotonic() + WEBHOOK_DEADLINE)
            except TimeoutError as exc:
                return JSONResponse({"ok": False, "error": str(exc)}, 503)
            return JSONResponse({"ok": True, "outcome": outcome})

        return receive
