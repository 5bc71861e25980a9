"""The `messenger` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
from typing import Annotated, Literal

from fastmcp import FastMCP
from pydantic import Field

from butlers.jsonutil import AnyJson, to_json
from butlers.modules.base import Module, ModuleConfig, ModuleContext, migration_chain, tool_meta
from butlers.modules.channels import ChannelError
from butlers.modules.messenger.store import MessengerStore
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
        store = MessengerStore(ctx.pool)
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
            row = await store.record(name, recipient, subject, message, error, provider_id)
            return to_json(row)

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def deliveries_list(
            channel: str | None = None,
            status: Literal["sent", "failed"] | None = None,
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
