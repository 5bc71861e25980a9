"""The `calendar` module's MCP-facing class: config, tools, background sync."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import default_serializer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from butlers.jsonutil import MAX_FIELD_CHARS, AnyJson, EncodedJson, Note, ShortText, to_json
from butlers.modules.base import (
    Module,
    ModuleConfig,
    ModuleContext,
    ModuleError,
    migration_chain,
    tool_meta,
)
from butlers.modules.briefing import MAX_LINES, day_bounds
from butlers.modules.calendar import ical
from butlers.modules.calendar.caldav import CalDavClient, CalDavError, Conflict
from butlers.modules.calendar.freebusy import free_busy
from butlers.modules.calendar.listings import ListingCache
from butlers.modules.calendar.login import caldav_client
from butlers.modules.calendar.store import (
    CalendarStore,
    Source,
    list_instances,
)
from butlers.modules.calendar.sync import CalendarSync
from butlers.scheduling.butler_events import butler_entries
from butlers.tooling import tool

NAME = "calendar"
MAX_RANGE = timedelta(days=400)
log = logging.getLogger(__name__)
Title = Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS)]
Rule = Annotated[
    str,
    Field(
        max_length=MAX_FIELD_CHARS, description="RFC 5545 RRULE value, e.g. FREQ=WEEKLY;BYDAY=MO,WE"
    ),
]
Occurrence = Annotated[
    str,
    Field(
        min_length=10,
        max_length=64,
        description="the occurrence's `recurrence_id` from calendar_list_events",
    ),
]


class CalendarConfig(ModuleConfig):
    """Where the owner's calendars are and how to log in.

    `url` (or the credential `url_env` names) is the CalDAV server, the owner's principal
    or one calendar. `auth: basic` logs in with the credentials `username_env` and
    `password_env` name; `auth: google` uses the Google grant the dashboard stored (a
    bearer token; the URL is then Google's CalDAV endpoint). Credentials come from the
    butler's secrets store, the shared store, then the environment. Times without a
    zone, and all-day dates, are read in `timezone` (IANA name).
    """

    url: Annotated[str, Field(pattern=r"^https?://")] | None = None
    url_env: str | None = None
    auth: Literal["basic", "google"] = "basic"
    username_env: str | None = None
    password_env: str | None = None
    timezone: str = "UTC"
    default_calendar: str | None = None
    sync_interval_seconds: Annotated[int, Field(ge=0, le=86_400)] = 300
    past_days: Annotated[int, Field(ge=1, le=3660)] = 400
    future_days: Annotated[int, Field(ge=1, le=3660)] = 740
    timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 30.0

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (an IANA name, e.g. Europe/Paris)"
            ) from None
        return value


class Attendee(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: Annotated[
        str, Field(min_length=3, max_length=MAX_FIELD_CHARS, pattern=r"^[^@\s]+@[^@\s]+$")
    ]
    name: ShortText | None = None
    role: ShortText | None = None


class CalendarModule(Module):
    name = NAME
    config_model = CalendarConfig
    chain = migration_chain(NAME, __file__)
    dependencies = ("approvals",)

    def __init__(self) -> None:
        self.sync: CalendarSync | None = None
        self._loop: asyncio.Task[None] | None = None
        self._retired: set[asyncio.Task[None]] = set()

    async def start(self, ctx: ModuleContext) -> None:
        config: CalendarConfig = ctx.config
        client = caldav_client(ctx, config)
        self.sync = CalendarSync(
            client,
            CalendarStore(ctx.pool),
            ZoneInfo(config.timezone),
            config.past_days,
            config.future_days,
        )
        if config.sync_interval_seconds:
            self._loop = asyncio.create_task(
                self._sync_forever(config.sync_interval_seconds), name="calendar-sync"
            )

    async def _sync_forever(self, interval: float) -> None:
        assert self.sync is not None
        while True:
            try:
                await self.sync.sync(discover=False)
            except CalDavError as exc:
                log.warning("calendar sync: %s", exc)
            except Exception:
                log.exception("calendar sync failed; trying again in %.0f s", interval)
            await asyncio.sleep(interval)

    async def credentials_changed(self, ctx: ModuleContext, names: frozenset[str]) -> None:
        """A changed URL, username or password: the next request uses a new client (the
        calendars found again), without a restart. A change that leaves the module without
        a URL keeps the current client, with a warning."""
        config: CalendarConfig = ctx.config
        used = {config.url_env}
        if config.auth == "basic":
            used |= {config.username_env, config.password_env}
        touched = names & {name for name in used if name}
        if self.sync is None or not touched:
            return
        try:
            client = caldav_client(ctx, config)
        except ModuleError as exc:
            log.warning("calendar: keeps its current login: %s", exc)
            return
        async with self.sync.lock:
            old, self.sync.client = self.sync.client, client
            self.sync.discovered_at = None
        log.info("calendar: logs in with the changed %s", ", ".join(sorted(touched)))
        # A request under way on the old client may finish within its deadline.
        retire = asyncio.create_task(_close_later(old, config.timeout_seconds))
        self._retired.add(retire)
        retire.add_done_callback(self._retired.discard)

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
        for retire in list(self._retired):
            retire.cancel()
        await asyncio.gather(*self._retired, return_exceptions=True)
        if self.sync is not None:
            await self.sync.client.aclose()

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        sync = self.sync
        assert sync is not None
        config: CalendarConfig = ctx.config
        owner = sync.owner
        store = sync.store
        listings = ListingCache()
        store.written.append(lambda: listings.refill(store.pool))

        async def today(day: date, tz: ZoneInfo) -> list[str]:
            """The owner's events of `day` (from the local copy), for the briefing."""
            start, end = day_bounds(day, tz)
            found = await list_instances(store.pool, start, end, MAX_LINES)
            return [_briefing_line(event, tz) for event in found]

        ctx.services.briefings[NAME] = today
        butler = ctx.butler.name
        read = {"readOnlyHint": True}
        meta = tool_meta(NAME)
        # Attendees receive invitations from the server: inviting anyone needs approval.
        inviting = tool_meta(NAME, "conditional", ("attendees",))

        def local(value: datetime) -> datetime:
            return value.replace(tzinfo=owner) if value.tzinfo is None else value

        def span(start: datetime, end: datetime) -> tuple[datetime, datetime]:
            start, end = local(start), local(end)
            if end <= start:
                raise ToolError("`end` must be after `start`")
            if end - start > MAX_RANGE:
                raise ToolError(f"the range is at most {MAX_RANGE.days} days; ask in parts")
            return start, end

        def when(value: datetime, all_day: bool) -> date | datetime:
            moment = local(value).astimezone(owner)
            return moment.date() if all_day else moment

        async def target(calendar: str | None) -> Source:
            sources = await store.sources()
            if not sources:
                await sync.sync()
                sources = await store.sources()
            name = calendar or config.default_calendar
            writable = [s for s in sources if s.writable]
            chosen = [s for s in writable if name is None or name in (s.name, s.href)]
            if not chosen:
                known = ", ".join(s.name for s in writable) or "none"
                raise ToolError(f"no writable calendar {name!r}; writable calendars: {known}")
            return chosen[0]

        async def stored(event_id: uuid.UUID) -> Any:
            event = await store.event(event_id)
            if event is None:
                raise ToolError(f"no event {event_id}; list events with calendar_list_events")
            return event

        async def shown(event_id: uuid.UUID) -> dict[str, AnyJson]:
            """The event as listed (its next occurrence), with its ETag and rule."""
            event = await stored(event_id)
            first = await store.first_instance(event_id)
            found: dict[str, AnyJson] = {"event_id": str(event_id), "summary": event.summary}
            if first is not None:
                listed = to_json(first)
                assert isinstance(listed, dict)
                found.update(listed)
            found.update(etag=event.etag, rrule=event.rrule)
            return found

        async def occurrence(event_id: uuid.UUID, recurrence_id: str) -> dict[str, AnyJson]:
            """One occurrence as listed, after a change."""
            found = await store.occurrence(event_id, ical.recurrence_key(recurrence_id, owner))
            if found is None:
                return {"event_id": str(event_id), "recurrence_id": recurrence_id}
            listed = to_json(found)
            assert isinstance(listed, dict)
            return listed

        def conflict(exc: Conflict) -> ToolError:
            return ToolError(
                f"conflict: {exc}; the local copy now holds the server's version "
                "(read it again with calendar_list_events and decide what to change)"
            )

        @tool(mcp, meta=meta, annotations=read)
        async def calendar_list_events(
            start: datetime,
            end: datetime,
            limit: Annotated[int, Field(ge=1, le=2000)] = 500,
            include_butler: bool = True,
        ) -> AnyJson:
            """Events between `start` and `end` (the owner's, recurrences expanded), from the
            local copy; `include_butler` adds this butler's own entries (its schedules)."""
            start, end = span(start, end)
            key = (start, end, limit)
            # One round trip: the copy's version, and the listing only when the one kept
            # is older (both of one snapshot).
            current = listings.current(store.pool, key)
            if include_butler:
                listed, entries = await asyncio.gather(
                    current, butler_entries(store.pool, butler, start, end, limit)
                )
            else:
                listed, entries = await current, None
            events, events_text = listed
            result: dict[str, Any] = {"timezone": config.timezone, "events": events}
            text = f'{{"timezone":{default_serializer(config.timezone)},"events":{events_text}'
            if entries is not None:
                result["butler_events"] = butler_json = to_json(entries)
                text += f',"butler_events":{default_serializer(butler_json)}'
            return EncodedJson(result, text + "}")

        @tool(mcp, meta=inviting)
        async def calendar_create_event(
            summary: Title,
            start: datetime,
            end: datetime,
            all_day: bool = False,
            calendar: ShortText | None = None,
            description: Note | None = None,
            location: ShortText | None = None,
            rrule: Rule | None = None,
            attendees: Annotated[list[Attendee], Field(max_length=ical.MAX_ATTENDEES)]
            | None = None,
            alarms_minutes_before: Annotated[
                list[Annotated[int, Field(ge=0, le=40_320)]], Field(max_length=ical.MAX_ALARMS)
            ]
            | None = None,
        ) -> AnyJson:
            """Create an event on the owner's calendar (written to the server first). Times
            without a zone are the owner's; `all_day` uses their dates (`end` exclusive)."""
            span(start, end)
            fields = ical.EventFields(
                summary=summary,
                start=when(start, all_day),
                end=when(end, all_day),
                description=description,
                location=location,
                rrule=rrule,
                attendees=[a.model_dump() for a in attendees] if attendees else None,
                alarms_minutes_before=alarms_minutes_before,
            )
            source = await target(calendar)
            try:
                event_id = await sync.create(source, fields)
            except (CalDavError, ValueError) as exc:
                raise ToolError(f"could not create the event: {exc}") from None
            return await shown(event_id)

        @tool(mcp, meta=inviting, annotations={"idempotentHint": True})
        async def calendar_update_event(
            event_id: uuid.UUID,
            summary: Title | None = None,
            start: datetime | None = None,
            end: datetime | None = None,
            all_day: bool | None = None,
            description: Note | None = None,
            location: ShortText | None = None,
            rrule: Rule | None = None,
            attendees: Annotated[list[Attendee], Field(max_length=ical.MAX_ATTENDEES)]
            | None = None,
            alarms_minutes_before: Annotated[
                list[Annotated[int, Field(ge=0, le=40_320)]], Field(max_length=ical.MAX_ALARMS)
            ]
            | None = None,
        ) -> AnyJson:
            """Change the given fields of an event (the whole series when it recurs; `rrule`
            "" ends the recurrence). Refused as a conflict if the event changed on the
            server since the last sync."""
            event = await stored(event_id)
            day = event.all_day if all_day is None else all_day
            fields = ical.EventFields(
                summary=summary,
                start=None if start is None else when(start, day),
                end=None if end is None else when(end, day),
                description=description,
                location=location,
                rrule=rrule,
                attendees=None if attendees is None else [a.model_dump() for a in attendees],
                alarms_minutes_before=alarms_minutes_before,
            )
            if fields == ical.EventFields():
                raise ToolError("nothing to update: pass at least one field")
            try:
                await sync.update(event, fields)
            except Conflict as exc:
                raise conflict(exc) from None
            except (CalDavError, ValueError) as exc:
                raise ToolError(f"could not update the event: {exc}") from None
            return await shown(event_id)

        @tool(mcp, meta=tool_meta(NAME, "always"), annotations={"destructiveHint": True})
        async def calendar_delete_event(event_id: uuid.UUID) -> AnyJson:
            """Delete an event (the whole series) from the owner's calendar (needs approval)."""
            event = await stored(event_id)
            try:
                await sync.delete(event)
            except Conflict as exc:
                raise conflict(exc) from None
            except CalDavError as exc:
                raise ToolError(f"could not delete the event: {exc}") from None
            return {"event_id": str(event_id), "deleted": True, "summary": event.summary}

        @tool(mcp, meta=meta, annotations={"idempotentHint": True})
        async def calendar_update_occurrence(
            event_id: uuid.UUID,
            recurrence_id: Occurrence,
            summary: Title | None = None,
            start: datetime | None = None,
            end: datetime | None = None,
            description: Note | None = None,
            location: ShortText | None = None,
        ) -> AnyJson:
            """Change one occurrence of a recurring event, the rest of the series unchanged:
            `recurrence_id` is the occurrence's as calendar_list_events shows it. A new
            `start` alone moves it and keeps its length. Refused as a conflict if the event
            changed on the server since the last sync."""
            event = await stored(event_id)
            fields = ical.EventFields(
                summary=summary,
                start=None if start is None else when(start, event.all_day),
                end=None if end is None else when(end, event.all_day),
                description=description,
                location=location,
            )
            if fields == ical.EventFields():
                raise ToolError("nothing to update: pass at least one field")
            try:
                await sync.update_occurrence(event, recurrence_id, fields)
            except Conflict as exc:
                raise conflict(exc) from None
            except (CalDavError, ValueError) as exc:
                raise ToolError(f"could not update the occurrence: {exc}") from None
            return await occurrence(event_id, recurrence_id)

        @tool(mcp, meta=tool_meta(NAME, "always"), annotations={"destructiveHint": True})
        async def calendar_cancel_occurrence(
            event_id: uuid.UUID, recurrence_id: Occurrence
        ) -> AnyJson:
            """Remove one occurrence of a recurring event from the owner's calendar, the rest
            of the series kept (needs approval)."""
            event = await stored(event_id)
            try:
                await sync.cancel_occurrence(event, recurrence_id)
            except Conflict as exc:
                raise conflict(exc) from None
            except (CalDavError, ValueError) as exc:
                raise ToolError(f"could not cancel the occurrence: {exc}") from None
            return {
                "event_id": str(event_id),
                "recurrence_id": recurrence_id,
                "cancelled": True,
                "summary": event.summary,
            }

        @tool(mcp, meta=meta, annotations=read)
        async def calendar_free_slots(
            start: datetime,
            end: datetime,
            duration_minutes: Annotated[int, Field(ge=5, le=1440)] = 30,
            day_start: time = time(9),
            day_end: time = time(17),
            limit: Annotated[int, Field(ge=1, le=200)] = 20,
        ) -> AnyJson:
            """Free slots of at least `duration_minutes` between `start` and `end`, within
            the owner's working hours (`day_start` to `day_end`, their time zone)."""
            start, end = span(start, end)
            busy = await store.busy(start, end)
            slots = free_slots(start, end, busy, owner, day_start, day_end, duration_minutes)
            return {
                "timezone": config.timezone,
                "slots": [
                    {
                        "start": a.astimezone(owner).isoformat(),
                        "end": b.astimezone(owner).isoformat(),
                    }
                    for a, b in slots[:limit]
                ],
            }

        @tool(mcp, meta=meta, annotations=read)
        async def calendar_free_busy(
            start: datetime, end: datetime, calendar: ShortText | None = None
        ) -> AnyJson:
            """Busy periods between `start` and `end` per calendar (all, or the one named),
            as the CalDAV server computes them (its free-busy report); a server without
            the report gets them computed from the synced events, and `source` says which
            (with the reason). Each period's `type` is BUSY, BUSY-TENTATIVE or
            BUSY-UNAVAILABLE."""
            start, end = span(start, end)
            sources = await store.sources()
            if calendar is not None:
                sources = [s for s in sources if calendar in (s.name, s.href)]
                if not sources:
                    known = ", ".join(s.name for s in await store.sources()) or "none"
                    raise ToolError(f"no calendar {calendar!r}; calendars: {known}")
            found = await free_busy(sync.client, store, sources, start, end)
            return {
                "timezone": config.timezone,
                "calendars": [
                    {
                        "calendar": item.calendar,
                        "source": item.source,
                        "reason": item.reason,
                        "busy": [
                            {
                                "start": p.start.astimezone(owner).isoformat(),
                                "end": p.end.astimezone(owner).isoformat(),
                                "type": p.kind,
                            }
                            for p in item.periods
                        ],
                    }
                    for item in found
                ],
            }

        @tool(mcp, meta=meta)
        async def calendar_sync(rediscover: bool = False) -> AnyJson:
            """Bring the local copy up to date with the server now; `rediscover` also looks
            for calendars added or removed on the server (done every 15 minutes anyway)."""
            try:
                reports = await sync.sync(discover=rediscover)
            except CalDavError as exc:
                raise ToolError(f"sync failed: {exc}") from None
            return to_json([vars(report) for report in reports])

        @tool(mcp, meta=meta, annotations=read)
        async def calendar_list_calendars() -> AnyJson:
            """The owner's calendars with their sync state."""
            return to_json(await store.sources())


async def _close_later(client: CalDavClient, delay: float) -> None:
    try:
        await asyncio.sleep(delay)
    finally:
        await client.aclose()


def _briefing_line(event: Any, tz: ZoneInfo) -> str:
    where = f" ({event.location})" if event.location else ""
    if event.all_day:
        return f"all day: {event.summary}{where}"
    start, end = event.starts_at.astimezone(tz), event.ends_at.astimezone(tz)
    return f"{start:%H:%M}-{end:%H:%M}: {event.summary}{where}"


def free_slots(
    start: datetime,
    end: datetime,
    busy: list[tuple[datetime, datetime]],
    owner: ZoneInfo,
    day_start: time,
    day_end: time,
    minutes: int,
) -> list[tuple[datetime, datetime]]:
    """Gaps of at least `minutes` between busy intervals, within working hours each day."""
    need = timedelta(minutes=minutes)
    slots: list[tuple[datetime, datetime]] = []
    day = start.astimezone(owner).date()
    last = end.astimezone(owner).date()
    while day <= last and len(slots) < 1000:
        lo = max(start, datetime.combine(day, day_start, owner))
        hi = min(end, datetime.combine(day, day_end, owner))
        cursor = lo
        for begin, finish in busy:
            if finish <= cursor or begin >= hi:
                continue
            if begin - cursor >= need:
                slots.append((cursor, begin))
            cursor = max(cursor, finish)
        if hi - cursor >= need:
            slots.append((cursor, hi))
        day += timedelta(days=1)
    return [(a.astimezone(UTC), b.astimezone(UTC)) for a, b in slots]
