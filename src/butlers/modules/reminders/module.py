"""The `reminders` module's MCP-facing class: its config, tools and lifecycle.

A reminder reaches the owner only (the messenger's default channel, or the channel
named), starts no model session and runs no tool, so LLM sessions may hold `remind`.
A session may cancel only what it created; the owner's token cancels anything.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, field_validator

from butlers.auth.access import access_meta
from butlers.auth.middleware import current_caller
from butlers.jsonutil import AnyJson, json_object, to_json
from butlers.llm.offer import ON_REQUEST
from butlers.modules.base import Module, ModuleConfig, ModuleContext, migration_chain, tool_meta
from butlers.modules.briefing import MAX_LINES, day_bounds
from butlers.modules.reminders.briefing import DEFAULT_SECTIONS, Briefing, sections_json
from butlers.modules.reminders.delivery import DeliveryLoop, OwnerLine
from butlers.modules.reminders.store import ReminderStore, TooManyReminders
from butlers.modules.reminders.timing import (
    TimingError,
    check_at,
    check_rule,
    parse_after,
    zone,
)
from butlers.scheduling.jobs import JobContext
from butlers.tooling import tool

NAME = "reminders"
TEXT_MAX = 2000
Status = Literal["pending", "delivered", "failed", "cancelled"]
ModuleName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
SectionNames = Annotated[list[ModuleName], Field(min_length=1, max_length=32)]


class RemindersConfig(ModuleConfig):
    # Pending reminders a butler holds at most (a session cannot flood the owner).
    max_pending: Annotated[int, Field(ge=1, le=10000)] = 100
    # Recurring reminders fire at most this often.
    min_interval_seconds: Annotated[int, Field(ge=60, le=7 * 86400)] = 900
    # The owner's time zone: recurrence rules are wall-clock times there.
    time_zone: str = "UTC"

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        zone(value)
        return value


class RemindersModule(Module):
    name = NAME
    owned_jobs = ("morning_briefing",)
    config_model = RemindersConfig
    chain = migration_chain(NAME, __file__)
    # Every butler may remind; a butler whose domain it is sets `sessionTools: offered`.
    session_tools = ON_REQUEST

    def __init__(self) -> None:
        self.loop: DeliveryLoop | None = None
        self.briefing: Briefing | None = None
        self.line: OwnerLine | None = None

    async def run_briefing(self, sections: list[str]) -> dict[str, object]:
        if self.briefing is None:
            raise ToolError("the reminders module has not finished starting")
        return await self.briefing.run(sections)

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        store = ReminderStore(ctx.pool)
        config: RemindersConfig = ctx.config
        meta = tool_meta(NAME)
        read = {"readOnlyHint": True}
        tz = zone(config.time_zone)

        async def due_today(day: date, tz: ZoneInfo) -> list[str]:
            start, end = day_bounds(day, tz)
            rows = await store.due_in(start, end, MAX_LINES)
            return [
                f"{r.next_due_at.astimezone(tz):%H:%M}: {r.text}" for r in rows if r.next_due_at
            ]

        ctx.services.briefings[NAME] = due_today

        async def morning_briefing(
            ctx: JobContext, sections: SectionNames | None = None
        ) -> dict[str, object]:
            """Gather every butler's briefing sections, have this butler's model write
            one message, send it to the owner."""
            return await self.run_briefing(sections or list(DEFAULT_SECTIONS))

        ctx.services.jobs.register("morning_briefing", morning_briefing)
        modules = sorted(ctx.butler.resource.spec.modules)

        @tool(mcp, meta=meta | access_meta(router=True, operator=True), annotations=read)
        async def briefing_sections(day: date | None = None) -> AnyJson:
            """This butler's sections of the morning briefing for `day` (today in the
            owner's time zone by default): a few lines per module that has any."""
            when = day or datetime.now(UTC).astimezone(tz).date()
            assert self.briefing is not None
            return to_json(
                sections_json(ctx.butler.name, modules, await self.briefing.sections(when))
            )

        @tool(mcp, meta=meta | access_meta(sessions=False))
        async def briefing_send(
            sections: SectionNames | None = None,
        ) -> AnyJson:
            """Send the morning briefing now (what the `morning_briefing` job does at its
            scheduled time): every butler's sections, one message written by this
            butler's model, delivered to the owner."""
            return to_json(await self.run_briefing(sections or list(DEFAULT_SECTIONS)))

        @tool(mcp, meta=meta)
        async def remind(
            text: Annotated[str, Field(min_length=1, max_length=TEXT_MAX)],
            at: Annotated[
                datetime | None,
                Field(description="When (ISO 8601 with offset); the start of a recurring rule."),
            ] = None,
            after: Annotated[
                str | None,
                Field(max_length=32, description="In how long: '90s', '15m', '2h30m', 'PT2H'."),
            ] = None,
            rrule: Annotated[
                str | None,
                Field(
                    max_length=500,
                    description="Recurring: an RFC 5545 RRULE in the owner's time zone, "
                    "e.g. FREQ=WEEKLY;BYDAY=SU;BYHOUR=18;BYMINUTE=0.",
                ),
            ] = None,
            channel: Annotated[
                str | None, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="e.g. email")
            ] = None,
        ) -> AnyJson:
            """Remind the owner (only the owner) of `text` at a time (`at`), after a delay
            (`after`), or recurring (`rrule`, starting at `at` or now). Delivered by the
            messenger on the owner's default channel unless `channel` is given."""
            now = datetime.now(UTC)
            if at is not None and after is not None:
                raise ToolError("give either at or after, not both")
            if at is None and after is None and rrule is None:
                raise ToolError("say when: at (a time), after (a delay) or rrule (recurring)")
            try:
                start = check_at(at, now) if at is not None else now
                if after is not None:
                    start = now + parse_after(after)
                due = start
                if rrule is not None:
                    interval = timedelta(seconds=config.min_interval_seconds)
                    due = check_rule(rrule, start, zone(config.time_zone), interval)
            except TimingError as exc:
                raise ToolError(str(exc)) from None
            caller = current_caller()
            try:
                row = await store.create(
                    text=text,
                    channel=channel,
                    rrule=rrule.strip() if rrule else None,
                    time_zone=config.time_zone,
                    due_at=due,
                    created_by=caller.label,
                    session_id=caller.name if caller.kind == "session" else None,
                    max_pending=config.max_pending,
                )
            except TooManyReminders as exc:
                raise ToolError(str(exc)) from None
            if self.loop is not None:
                self.loop.wake()
            return to_json(row)

        @tool(mcp, meta=meta, annotations=read)
        async def reminders_list(
            status: Status | None = None, limit: Annotated[int, Field(ge=1, le=500)] = 50
        ) -> AnyJson:
            """This butler's reminders: pending ones first, by due time."""
            return to_json(await store.listed(status, limit))

        @tool(mcp, meta=meta, annotations=read)
        async def reminder_get(reminder_id: uuid.UUID) -> AnyJson:
            """One reminder with its delivery attempts, newest first."""
            found = await store.with_deliveries(reminder_id, 100)
            if found is None:
                raise ToolError(f"no reminder {reminder_id} on this butler")
            row, attempts = found
            return json_object(asdict(row)) | {"deliveries": to_json(attempts)}

        @tool(mcp, meta=meta)
        async def reminder_cancel(reminder_id: uuid.UUID) -> AnyJson:
            """Cancel a pending reminder. A session may cancel only reminders it created."""
            row = await store.get(reminder_id)
            if row is None:
                raise ToolError(f"no reminder {reminder_id} on this butler")
            caller = current_caller()
            if not caller.is_user and row.created_by != caller.label:
                raise ToolError(
                    f"reminder {reminder_id} was created by {row.created_by}; only it or "
                    "the owner may cancel it"
                )
            cancelled = await store.cancel(reminder_id, caller.label)
            if cancelled is None:
                raise ToolError(f"reminder {reminder_id} is {row.status}, not pending")
            return to_json(cancelled)

    async def ready(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        tools = {t.name for t in await mcp.list_tools(run_middleware=False)}
        line = OwnerLine(
            mcp,
            butler=ctx.butler.name,
            local_tools=tools,
            switchboard_url=ctx.services.switchboard_url,
            token=ctx.butler.token,
        )
        self.loop = DeliveryLoop(ReminderStore(ctx.pool), line, ctx.butler.name)
        config: RemindersConfig = ctx.config
        self.briefing = Briefing(
            butler=ctx.butler.name,
            spawner=ctx.services.spawner,
            line=line,
            sources=ctx.services.briefings,
            tz=zone(config.time_zone),
        )
        self.line = line
        self.loop.start()

    async def tools_changed(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        if self.line is not None:
            self.line.use_local({t.name for t in await mcp.list_tools(run_middleware=False)})

    async def stop(self) -> None:
        if self.loop is not None:
            await self.loop.aclose()
            self.loop = None
