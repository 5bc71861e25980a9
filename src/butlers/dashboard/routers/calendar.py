"""The calendar workspace: the owner's events (every butler with the `calendar` module)
and the butlers' own entries (their schedules), read by SQL from the local copies;
writes go through the owning butler's `calendar_*` tools.

A deletion needs the owner's approval even from the dashboard: the call is held by the
butler, so the route starts it, waits a moment, and answers `pending_approval` with the
approval's id when it is still held (the Approvals page decides; the call then runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import DashboardError, ValidationFailed
from butlers.dashboard.module_views import butlers_of
from butlers.jsonutil import to_json
from butlers.modules.approvals.store import pending_for
from butlers.modules.calendar.store import EventInstance, Source, list_instances, list_sources
from butlers.scheduling.butler_events import butler_entries

router = APIRouter(tags=["calendar"])
log = logging.getLogger(__name__)
MODULE = "calendar"
MAX_RANGE = timedelta(days=400)
STALE_AFTER = timedelta(minutes=30)
HELD_WAIT = 3.0  # seconds a deletion is waited for before answering "pending_approval"
MAX_HELD = 32  # deletions waiting for approval at once
_held: set[asyncio.Task[Any]] = set()
OCCURRENCE_FIELDS = {"summary", "start", "end", "description", "location"}


class CalendarEntry(BaseModel):
    id: str
    view: Literal["user", "butler"]
    butler: str
    source_type: Literal["caldav", "schedule", "reminder"]
    calendar: str | None
    event_id: str | None
    recurrence_id: str | None  # one occurrence of a recurring event (its original start)
    ref: str | None
    title: str
    start: datetime
    end: datetime
    all_day: bool
    recurring: bool
    location: str | None
    description: str | None
    attendees: list[dict[str, Any]]
    alarms: list[dict[str, Any]]
    status: str | None
    editable: bool
    sync_state: Literal["fresh", "stale", "failed", "never", "live"]


class CalendarSource(BaseModel):
    butler: str
    source_id: str
    calendar: str
    color: str | None
    writable: bool
    last_synced_at: datetime | None
    last_error: str | None
    sync_state: Literal["fresh", "stale", "failed", "never"]


class CalendarMeta(BaseModel):
    sources: list[CalendarSource]
    lanes: list[Literal["user", "butler"]]
    writable: list[str]  # butlers whose calendar the workspace can change
    butlers: list[str]  # butlers with butler-owned entries


class EventFields(BaseModel):
    summary: Annotated[str | None, Field(min_length=1, max_length=300)] = None
    start: datetime | None = None
    end: datetime | None = None
    all_day: bool | None = None
    calendar: Annotated[str | None, Field(max_length=300)] = None
    description: Annotated[str | None, Field(max_length=20_000)] = None
    location: Annotated[str | None, Field(max_length=300)] = None
    rrule: Annotated[str | None, Field(max_length=300)] = None
    attendees: Annotated[list[dict[str, Any]] | None, Field(max_length=200)] = None
    alarms_minutes_before: Annotated[list[int] | None, Field(max_length=10)] = None


class UserEventWrite(BaseModel):
    action: Literal["create", "update", "delete"]
    butler: str | None = None
    event_id: str | None = None
    # With `recurrence_id`, an update or delete touches that one occurrence of the series.
    recurrence_id: Annotated[str | None, Field(max_length=64)] = None
    event: EventFields = Field(default_factory=EventFields)


class ButlerEventWrite(BaseModel):
    action: Literal["toggle", "delete"]
    butler: str
    ref: Annotated[str, Field(min_length=1, max_length=300)]  # the schedule's id or name
    enabled: bool | None = None


class SyncRequest(BaseModel):
    butler: str | None = None


class WriteOutcome(BaseModel):
    status: Literal["done", "pending_approval"]
    butler: str
    result: Any = None
    approval_id: str | None = None
    sources: list[CalendarSource]


def _sync_state(source: Source) -> Literal["fresh", "stale", "failed", "never"]:
    if source.last_error:
        return "failed"
    if source.last_synced_at is None:
        return "never"
    fresh = datetime.now(source.last_synced_at.tzinfo) - source.last_synced_at < STALE_AFTER
    return "fresh" if fresh else "stale"


def _zone(name: str | None) -> ZoneInfo | None:
    if name is None:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed(
            f"unknown timezone {name!r} (an IANA name, e.g. Europe/Paris)"
        ) from None


def _range(start: datetime, end: datetime) -> None:
    if start.tzinfo is None or end.tzinfo is None:
        raise ValidationFailed("`start` and `end` need a UTC offset (e.g. 2026-03-01T00:00:00Z)")
    if end <= start:
        raise ValidationFailed("`end` must be after `start`")
    if end - start > MAX_RANGE:
        raise ValidationFailed(f"the range is at most {MAX_RANGE.days} days")


def _user_entry(butler: str, item: EventInstance, states: Mapping[str, str]) -> CalendarEntry:
    return CalendarEntry(
        id=f"{butler}:{item.event_id}:{item.starts_at.isoformat()}",
        view="user",
        butler=butler,
        source_type="caldav",
        calendar=item.calendar,
        event_id=str(item.event_id),
        recurrence_id=item.recurrence_id,
        ref=item.uid,
        title=item.summary,
        start=item.starts_at,
        end=item.ends_at,
        all_day=item.all_day,
        recurring=item.recurring,
        location=item.location,
        description=item.description,
        attendees=list(item.attendees) if isinstance(item.attendees, list) else [],  # type: ignore[arg-type]
        alarms=list(item.alarms) if isinstance(item.alarms, list) else [],  # type: ignore[arg-type]
        status=item.status,
        editable=item.writable,
        sync_state=states.get(str(item.source_id), "never"),  # type: ignore[arg-type]
    )


async def _sources(
    dashboard: Dashboard, names: list[str]
) -> tuple[list[CalendarSource], list[str]]:
    outcome = await dashboard.db.fan_read(list_sources, names)
    sources = [
        CalendarSource(
            butler=butler,
            source_id=str(s.id),
            calendar=s.name,
            color=s.color,
            writable=s.writable,
            last_synced_at=s.last_synced_at,
            last_error=s.last_error,
            sync_state=_sync_state(s),
        )
        for butler, found in sorted(outcome.results.items())
        for s in found
    ]
    return sources, sorted(outcome.failed)


@router.get("/api/calendar/workspace", response_model=ApiResponse[list[CalendarEntry]])
async def calendar_workspace(
    dashboard: Ctx,
    start: datetime,
    end: datetime,
    view: Literal["user", "butler"] = "user",
    timezone: str | None = None,
    butler: str | None = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 2000,
) -> dict[str, Any]:
    """Entries overlapping [start, end): the owner's events (`view=user`) or the butlers'
    own (`view=butler`), earliest first; `timezone` converts every time for display."""
    _range(start, end)
    zone = _zone(timezone)
    entries: list[CalendarEntry] = []
    failed: list[str]
    if view == "user":
        names = butlers_of(dashboard, MODULE, butler)
        sources, failed = await _sources(dashboard, names)
        states = {s.source_id: s.sync_state for s in sources}
        instances = await dashboard.db.fan_read(
            lambda pool: list_instances(pool, start, end, limit), names
        )
        for name, found in instances.results.items():
            entries.extend(_user_entry(name, item, states) for item in found)
        failed = sorted(set(failed) | set(instances.failed))
    else:
        names = [butler] if butler else sorted(dashboard.butlers())
        if butler:
            dashboard.butler(butler)
        results: dict[str, list[Any]] = {}

        async def one(name: str) -> None:
            results[name] = await dashboard.db.read(
                name, lambda pool: butler_entries(pool, name, start, end, limit)
            )

        gathered = await asyncio.gather(*(one(n) for n in names), return_exceptions=True)
        failed = [n for n, r in zip(names, gathered, strict=True) if isinstance(r, Exception)]
        for name, owned in results.items():
            entries.extend(
                CalendarEntry(
                    id=f"{name}:{e.kind}:{e.ref}:{e.starts_at.isoformat()}",
                    view="butler",
                    butler=name,
                    source_type=e.kind,
                    calendar=None,
                    event_id=None,
                    recurrence_id=None,
                    ref=e.ref,
                    title=e.title,
                    start=e.starts_at,
                    end=e.ends_at,
                    all_day=False,
                    recurring=e.recurring,
                    location=None,
                    description=e.detail,
                    attendees=[],
                    alarms=[],
                    status="enabled" if e.enabled else "disabled",
                    editable=e.kind == "schedule",  # reminders change through their tools
                    sync_state="live",
                )
                for e in owned
            )
    entries.sort(key=lambda e: (e.start, e.butler, e.title))
    entries = entries[:limit]
    if zone is not None:
        for entry in entries:
            entry.start, entry.end = entry.start.astimezone(zone), entry.end.astimezone(zone)
    return ok(entries, failed_butlers=failed)


async def _meta(dashboard: Dashboard) -> tuple[CalendarMeta, list[str]]:
    names = butlers_of(dashboard, MODULE)
    sources, failed = await _sources(dashboard, names)
    meta = CalendarMeta(
        sources=sources,
        lanes=["user", "butler"],
        writable=names,
        butlers=sorted(dashboard.butlers()),
    )
    return meta, failed


@router.get("/api/calendar/workspace/meta", response_model=ApiResponse[CalendarMeta])
async def calendar_meta(dashboard: Ctx) -> dict[str, Any]:
    """Calendars per butler with their sync state, the lanes, and who can be written."""
    meta, failed = await _meta(dashboard)
    return ok(meta, failed_butlers=failed)


def _calendar_butler(dashboard: Dashboard, butler: str | None) -> str:
    names = butlers_of(dashboard, MODULE)
    if butler is None:
        if len(names) != 1:
            raise ValidationFailed(
                f"name the butler (`butler`): calendar butlers are {', '.join(names) or 'none'}"
            )
        return names[0]
    dashboard.butler(butler)
    if butler not in names:
        raise ValidationFailed(f"butler {butler!r} has no calendar module")
    return butler


@router.post("/api/calendar/workspace/sync", response_model=ApiResponse[CalendarMeta])
async def calendar_sync(body: SyncRequest, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Sync now (`calendar_sync` of one butler, or of every calendar butler)."""
    if body.butler:
        names = [_calendar_butler(dashboard, body.butler)]
    else:
        names = butlers_of(dashboard, MODULE)
    failed: list[str] = []
    for name in names:
        try:
            await dashboard.write(
                request,
                dashboard.butler(name),
                "calendar.sync",
                "calendar_sync",
                {"rediscover": True},
                timeout=120,
            )
        except DashboardError as exc:
            if body.butler:
                raise
            log.warning("calendar sync of %s: %s", name, exc)
            failed.append(name)
    meta, unread = await _meta(dashboard)
    return ok(meta, failed_butlers=sorted(set(failed) | set(unread)))


async def _pending_approval(
    dashboard: Dashboard, butler: str, tool: str, event_id: str
) -> str | None:
    found = await dashboard.db.read(
        butler, lambda pool: pending_for(pool, tool, "event_id", event_id)
    )
    return None if found is None else str(found)


@router.post("/api/calendar/workspace/user-events", response_model=ApiResponse[WriteOutcome])
async def calendar_user_events(
    body: UserEventWrite, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Create, update or delete one of the owner's events through the butler's tools;
    with `recurrence_id`, update or cancel one occurrence of a recurring event."""
    name = _calendar_butler(dashboard, body.butler)
    info = dashboard.butler(name)
    fields = body.event.model_dump(mode="json", exclude_none=True)
    if body.action != "create" and not body.event_id:
        raise ValidationFailed(f"`event_id` is needed to {body.action} an event")
    status: Literal["done", "pending_approval"] = "done"
    result: Any = None
    approval_id = None
    if body.action == "create":
        for needed in ("summary", "start", "end"):
            if needed not in fields:
                raise ValidationFailed(f"`event.{needed}` is needed to create an event")
        outcome = await dashboard.write(
            request, info, "calendar.create", "calendar_create_event", fields, timeout=60
        )
        result = outcome.data
    elif body.action == "update":
        fields.pop("calendar", None)
        tool, arguments = "calendar_update_event", {"event_id": body.event_id, **fields}
        if body.recurrence_id is not None:
            extra = sorted(set(fields) - OCCURRENCE_FIELDS)
            if extra:
                raise ValidationFailed(
                    f"one occurrence can change only {', '.join(sorted(OCCURRENCE_FIELDS))}; "
                    f"change {', '.join(extra)} on the whole series (no `recurrence_id`)"
                )
            tool = "calendar_update_occurrence"
            arguments["recurrence_id"] = body.recurrence_id
        outcome = await dashboard.write(
            request,
            info,
            "calendar.update",
            tool,
            arguments,
            target=body.event_id,
            timeout=60,
        )
        result = outcome.data
    else:
        if len(_held) >= MAX_HELD:
            raise ValidationFailed(f"{MAX_HELD} deletions already wait for approval")
        timeout = (info.resource.spec.approvals.timeout_seconds if info.resource else 300) + 30
        tool, arguments = "calendar_delete_event", {"event_id": body.event_id}
        if body.recurrence_id is not None:
            tool = "calendar_cancel_occurrence"
            arguments["recurrence_id"] = body.recurrence_id
        call = asyncio.create_task(
            dashboard.write(
                request,
                info,
                "calendar.delete",
                tool,
                arguments,
                target=body.event_id,
                timeout=timeout,
            )
        )
        _held.add(call)
        call.add_done_callback(_held.discard)
        call.add_done_callback(lambda t: t.cancelled() or t.exception())
        done, _ = await asyncio.wait({call}, timeout=HELD_WAIT)
        if done:
            result = call.result().data
        else:
            status = "pending_approval"
            approval_id = await _pending_approval(dashboard, name, tool, str(body.event_id))
    sources, _ = await _sources(dashboard, [name])
    return ok(
        WriteOutcome(
            status=status,
            butler=name,
            result=to_json(result),
            approval_id=approval_id,
            sources=sources,
        )
    )


@router.post("/api/calendar/workspace/butler-events", response_model=ApiResponse[WriteOutcome])
async def calendar_butler_events(
    body: ButlerEventWrite, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Toggle or delete a butler's own entry (a schedule) through its schedule tools."""
    info = dashboard.butler(body.butler)
    row = await dashboard.db.fetchrow(
        body.butler,
        "SELECT name FROM scheduled_tasks WHERE id::text = $1 OR name = $1",
        body.ref,
    )
    if row is None:
        raise ValidationFailed(f"no schedule {body.ref!r} on butler {body.butler!r}")
    schedule = str(row["name"])
    if body.action == "toggle":
        arguments: dict[str, Any] = {"name": schedule}
        if body.enabled is not None:
            arguments["enabled"] = body.enabled
        outcome = await dashboard.write(
            request, info, "schedule.toggle", "schedule_toggle", arguments, target=schedule
        )
    else:
        outcome = await dashboard.write(
            request,
            info,
            "schedule.delete",
            "schedule_delete",
            {"name": schedule},
            target=schedule,
        )
    return ok(
        WriteOutcome(status="done", butler=body.butler, result=to_json(outcome.data), sources=[])
    )
