"""The `messenger` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
import logging
import uuid
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.jsonutil import AnyJson, to_json
from butlers.mcp_clients import McpClient
from butlers.modules.base import Module, ModuleConfig, ModuleContext, migration_chain, tool_meta
from butlers.modules.messenger.outbound import (
    SEND_TIMEOUT,
    OutboundGuard,
    OwnerDestinations,
    normalize,
)
from butlers.modules.messenger.owners import FETCH_TIMEOUT, OwnerBook
from butlers.modules.messenger.store import Delivered, MessengerStore
from butlers.tooling import tool

log = logging.getLogger(__name__)
NAME = "messenger"
CHANNEL_MODULES = ("telegram", "email")
ChannelName = Literal["telegram", "email"]
# A reply left `sending` this long is taken to be cut off (a send ends within
# SEND_TIMEOUT, its record just after); an earlier start's claim is taken at once.
CLAIM_STALE = 2 * SEND_TIMEOUT
STOP_WAIT = 10.0  # how long a stopping messenger lets replies being sent finish


class MessengerConfig(ModuleConfig):
    default_channel: ChannelName | None = None
    # Only for a messenger without a switchboard: the owner is configured once, in
    # spec.modules.switchboard.owner, and read from there (owners.py); given beside a
    # switchboard it must say the same.
    owner: OwnerDestinations = OwnerDestinations()


class MessengerModule(Module):
    name = NAME
    config_model = MessengerConfig
    chain = migration_chain(NAME, __file__)
    optional_dependencies = (*CHANNEL_MODULES, "approvals")
    # Who may receive without approval is the owner's to change, never a session's;
    # replies go only to the thread a message came from, asked by the switchboard.
    session_hidden_tools = ("contact_allow", "contact_disallow", "reply")

    _clients: McpClient | None = None

    def __init__(self) -> None:
        super().__init__()
        self._sending: set[asyncio.Future[Delivered]] = set()

    async def stop(self) -> None:
        if self._sending:  # replies being sent finish and are recorded; held ones end
            _done, waiting = await asyncio.wait(self._sending, timeout=STOP_WAIT)
            for work in waiting:  # (a held reply is settled `refused` when cancelled)
                work.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
        if self._clients is not None:
            await self._clients.close()

    async def _send_reply(
        self, channel: str, thread: dict[str, Any], text: str, request_id: uuid.UUID
    ) -> Delivered:
        recipient = thread.get("chat_id") if channel == "telegram" else thread.get("to")
        if recipient is None or str(recipient) == "":
            error = f"the thread names no {channel} recipient: {thread!r}"[:500]
            return await self.store.record(
                channel, None, None, text, status="failed", error=error, tool="reply",
                request_id=request_id, thread=thread,
            )  # fmt: skip
        # Through the guard like every send: a thread that is not the owner's (a
        # group chat) is held for the owner's approval.
        return await self.guard.send(
            channel, str(recipient), None, text, tool="reply", thread=thread,
            request_id=request_id,
        )  # fmt: skip

    async def start(self, ctx: ModuleContext) -> None:
        config: MessengerConfig = ctx.config
        self.store = MessengerStore(ctx.pool)
        states = ctx.butler.modules

        def unavailable(channel: str) -> str:
            state = next((m for m in states if m.name == channel), None)
            if state is None:
                return f"channel {channel!r} is not enabled in spec.modules"
            return f"channel {channel!r} is {state.status} (phase {state.phase}): {state.error}"

        self.unavailable = unavailable
        fetch = None
        url = ctx.services.switchboard_url
        if url:  # the owner is the switchboard's (owners.py)
            token = ctx.butler.token
            clients = self._clients = McpClient(
                {"Authorization": f"Bearer {token}"} if token else None,
                timeout=FETCH_TIMEOUT,
                client_name=f"butlers-messenger {ctx.butler.name}",
            )

            async def fetch() -> Any:
                return (await clients.call_tool(url, "owner_identity", {})).data

        owners = OwnerBook({c: config.owner.of(c) for c in CHANNEL_MODULES}, fetch, normalize)
        self.guard = OutboundGuard(
            self.store, ctx.services.channels, owners, ctx.services, unavailable
        )
        ctx.services.outbound = self.guard

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store, guard, unavailable = self.store, self.guard, self.unavailable
        config: MessengerConfig = ctx.config
        channels = ctx.services.channels
        meta = tool_meta(NAME)
        owner_only = meta | access_meta(sessions=False)

        # The switchboard relays other butlers' messages to the owner (`owner_notify`).
        @tool(mcp, meta=meta | access_meta(router=True))
        async def notify(
            message: Annotated[str, Field(min_length=1, max_length=20000)],
            channel: ChannelName | None = None,
            recipient: str | None = None,
            subject: str | None = None,
        ) -> AnyJson:
            """Send a notification to the user (their default destination unless
            `recipient` is given). A recipient other than the owner's destinations and
            allowed contacts is held for the owner's approval. Every attempt is logged in
            `deliveries`."""
            name: str = channel or config.default_channel or next(iter(channels), "telegram")
            return to_json(await guard.send(name, recipient, subject, message, tool="notify"))

        @tool(mcp, meta=meta | access_meta(sessions=False, router=True))
        async def reply(
            channel: Literal["telegram", "email"],
            thread: dict[str, AnyJson],
            text: Annotated[str, Field(min_length=1, max_length=20000)],
            request_id: uuid.UUID,
        ) -> AnyJson:
            """Answer a message on the thread it came from (`thread`: the channel's
            references from its envelope) through the outbound guard (a recipient other
            than the owner's is held for approval) and record the delivery: one row per
            message (`request_id`), updated by each retry. The row is claimed (`sending`)
            before the send, so a reply already sent, held or refused, or being sent by
            another call, is returned as it is, never sent twice; only a send a crash cut
            off is sent again (counted in `interrupted`). Called by the switchboard."""
            run = ctx.butler.start.number if ctx.butler.start is not None else 0
            claimed = await store.claim_reply(
                request_id, channel, text, thread, run=run, stale_after=CLAIM_STALE
            )
            if claimed is None:
                return to_json(await store.reply_row(request_id))
            if claimed.interrupted:
                log.warning(
                    "reply to message %s: an earlier attempt was cut off while sending "
                    "(sending again; the owner may receive it twice)",
                    request_id,
                )
            # Once claimed, the send and its record finish even if the caller goes away
            # (else the row would stay `sending` until CLAIM_STALE).
            work = asyncio.ensure_future(self._send_reply(channel, thread, text, request_id))
            self._sending.add(work)
            work.add_done_callback(self._sending.discard)
            return to_json(await asyncio.shield(work))

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def deliveries_list(
            channel: str | None = None,
            status: Literal["sending", "sent", "failed", "held", "refused"] | None = None,
            limit: Annotated[int, Field(ge=1, le=500)] = 50,
        ) -> AnyJson:
            """The delivery log, newest first."""
            return to_json(await store.deliveries(channel, status, limit))

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def channels_list() -> AnyJson:
            """Each known channel and whether it can deliver right now."""
            return [
                {
                    "channel": name,
                    "available": name in channels,
                    "reason": None if name in channels else unavailable(name),
                }
                for name in CHANNEL_MODULES
            ]

        def address_of(channel: str, address: str) -> str:
            try:
                return normalize(channel, address)
            except ValueError as exc:
                raise ToolError(str(exc)) from None

        @tool(mcp, meta=owner_only, annotations={"idempotentHint": True})
        async def contact_allow(
            channel: ChannelName,
            address: Annotated[str, Field(min_length=1, max_length=320)],
            name: Annotated[str | None, Field(max_length=300)] = None,
        ) -> AnyJson:
            """Allow sends to this recipient without an approval (the owner's decision:
            not callable from a session)."""
            return to_json(await store.allow(channel, address_of(channel, address), name))

        @tool(mcp, meta=owner_only, annotations={"idempotentHint": True})
        async def contact_disallow(
            channel: ChannelName, address: Annotated[str, Field(min_length=1, max_length=320)]
        ) -> AnyJson:
            """Take a recipient off the allowed list (its sends are held again)."""
            address = address_of(channel, address)
            return {"channel": channel, "address": address,
                    "removed": await store.disallow(channel, address)}  # fmt: skip

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def contacts_allowed(limit: Annotated[int, Field(ge=1, le=500)] = 200) -> AnyJson:
            """Recipients the owner allowed besides their own destinations."""
            return to_json(await store.allowed(limit))
