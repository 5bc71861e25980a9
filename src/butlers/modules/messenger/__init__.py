"""`messenger`: outbound notifications through channel modules, with a delivery log.

Channels (`telegram`, `email`) are optional dependencies: the messenger works with
whichever are active and records a failed delivery, naming the reason, otherwise.
"""

import asyncio
from typing import Annotated, Literal

from fastmcp import FastMCP
from pydantic import Field

from butlers.jsonutil import AnyJson, to_json
from butlers.modules.base import Module, ModuleConfig, ModuleContext, migration_chain, tool_meta
from butlers.modules.channels import ChannelError
from butlers.tooling import tool

NAME = "messenger"
CHANNEL_MODULES = ("telegram", "email")
SEND_TIMEOUT = 30.0


class MessengerConfig(ModuleConfig):
    default_channel: Literal["telegram", "email"] | None = None


class MessengerModule(Module):
    name = NAME
    config_model = MessengerConfig
    chain = migration_chain(NAME, __file__)
    optional_dependencies = CHANNEL_MODULES

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        pool = ctx.pool
        config: MessengerConfig = ctx.config
        channels = ctx.services.channels
        states = ctx.butler.modules
        meta = tool_meta(NAME)

        def unavailable(channel: str) -> str:
            state = next((m for m in states if m.name == channel), None)
            if state is None:
                return f"channel {channel!r} is not enabled in spec.modules"
            return f"channel {channel!r} is {state.status} (phase {state.phase}): {state.error}"

        @tool(mcp, meta=meta)
        async def notify(
            message: Annotated[str, Field(min_length=1, max_length=20000)],
            channel: Literal["telegram", "email"] | None = None,
            recipient: str | None = None,
            subject: str | None = None,
        ) -> AnyJson:
            """Send a notification to the user; every attempt is logged in `deliveries`."""
            name: str = channel or config.default_channel or next(iter(channels), "telegram")
            provider_id, error = None, None
            target = channels.get(name)
            if target is None:
                error = unavailable(name)
            else:
                try:
                    async with asyncio.timeout(SEND_TIMEOUT):
                        provider_id = await target.send(recipient, subject, message)
                except (ChannelError, TimeoutError) as exc:
                    error = str(exc) or f"no answer within {SEND_TIMEOUT:g} s"
            row = await pool.fetchrow(
                "INSERT INTO deliveries (channel, recipient, subject, body, status, error, "
                "provider_message_id) VALUES ($1, $2, $3, $4, $5, $6, $7) "
                "RETURNING id, channel, recipient, subject, status, error, provider_message_id, "
                "created_at",
                name,
                recipient,
                subject,
                message,
                "failed" if error else "sent",
                error,
                provider_id,
            )
            return to_json(dict(row))

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def deliveries_list(
            channel: str | None = None,
            status: Literal["sent", "failed"] | None = None,
            limit: Annotated[int, Field(ge=1, le=500)] = 50,
        ) -> AnyJson:
            """The delivery log, newest first."""
            rows = await pool.fetch(
                "SELECT id, channel, recipient, subject, body, status, error, "
                "provider_message_id, created_at FROM deliveries "
                "WHERE ($1::text IS NULL OR channel = $1) AND ($2::text IS NULL OR status = $2) "
                "ORDER BY created_at DESC LIMIT $3",
                channel,
                status,
                limit,
            )
            return to_json([dict(r) for r in rows])

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
