"""A butler's schedules: read by SQL, changed through its `schedule_*` tools.

`{id}` is the schedule's id or its name. Schedules from the Butler spec
(`source: "spec"`) can be changed too, but the spec wins again when the butler
restarts.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, JsonValue

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound
from butlers.dashboard.sql import row_json
from butlers.spec import SCHEDULE_NAME_PATTERN

router = APIRouter(tags=["schedules"])
COLUMNS = (
    "id, name, cron, prompt, job_name, job_args, source, enabled, status, next_due_at, "
    "last_run_at, last_session_id, last_error, created_at, updated_at"
)


class Schedule(BaseModel):
    id: str
    name: str
    cron: str
    prompt: str | None
    job_name: str | None
    job_args: dict[str, Any]
    source: str
    enabled: bool
    status: str
    next_due_at: datetime | None
    last_run_at: datetime | None
    last_session_id: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime


class ScheduleCreate(BaseModel):
    name: Annotated[str, Field(pattern=SCHEDULE_NAME_PATTERN)]
    cron: Annotated[str, Field(min_length=1, max_length=200)]
    prompt: Annotated[str | None, Field(min_length=1)] = None
    job: str | None = None
    job_args: dict[str, JsonValue] | None = None
    enabled: bool = True


class ScheduleUpdate(BaseModel):
    cron: Annotated[str | None, Field(min_length=1, max_length=200)] = None
    prompt: Annotated[str | None, Field(min_length=1)] = None
    enabled: bool | None = None
    job_args: dict[str, JsonValue] | None = None


class ScheduleToggle(BaseModel):
    enabled: bool | None = None


class ScheduleDeleted(BaseModel):
    name: str
    deleted: bool


async def _name_of(dashboard: Dashboard, butler: str, ref: str) -> str:
    try:
        key = uuid.UUID(ref)
    except ValueError:
        row = await dashboard.db.fetchrow(
            butler, "SELECT name FROM scheduled_tasks WHERE name = $1", ref
        )
    else:
        row = await dashboard.db.fetchrow(
            butler, "SELECT name FROM scheduled_tasks WHERE id = $1", key
        )
    if row is None:
        raise NotFound(f"no schedule {ref!r} on butler {butler!r}", butler=butler)
    return str(row["name"])


@router.get("/api/butlers/{name}/schedules", response_model=ApiResponse[list[Schedule]])
async def list_schedules(name: str, dashboard: Ctx) -> dict[str, Any]:
    dashboard.butler(name)
    rows = await dashboard.db.fetch(name, f"SELECT {COLUMNS} FROM scheduled_tasks ORDER BY name")
    return ok([Schedule(**row_json(r)) for r in rows])


@router.post("/api/butlers/{name}/schedules", response_model=ApiResponse[Schedule], status_code=201)
async def create_schedule(
    name: str, body: ScheduleCreate, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Create through `schedule_create`; a bad cron or a duplicate name is TOOL_ERROR."""
    info = dashboard.butler(name)
    arguments = body.model_dump(exclude_none=True)
    outcome = await dashboard.write(
        request, info, "schedule.create", "schedule_create", arguments, target=body.name
    )
    return ok(Schedule(**outcome.data))


@router.put("/api/butlers/{name}/schedules/{schedule_id}", response_model=ApiResponse[Schedule])
async def update_schedule(
    name: str, schedule_id: str, body: ScheduleUpdate, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    info = dashboard.butler(name)
    schedule = await _name_of(dashboard, name, schedule_id)
    arguments = {"name": schedule, **body.model_dump(exclude_none=True)}
    outcome = await dashboard.write(
        request, info, "schedule.update", "schedule_update", arguments, target=schedule
    )
    return ok(Schedule(**outcome.data))


@router.delete(
    "/api/butlers/{name}/schedules/{schedule_id}", response_model=ApiResponse[ScheduleDeleted]
)
async def delete_schedule(
    name: str, schedule_id: str, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    info = dashboard.butler(name)
    schedule = await _name_of(dashboard, name, schedule_id)
    outcome = await dashboard.write(
        request, info, "schedule.delete", "schedule_delete", {"name": schedule}, target=schedule
    )
    return ok(ScheduleDeleted(**outcome.data))


@router.patch(
    "/api/butlers/{name}/schedules/{schedule_id}/toggle", response_model=ApiResponse[Schedule]
)
async def toggle_schedule(
    name: str,
    schedule_id: str,
    request: Request,
    dashboard: Ctx,
    body: ScheduleToggle | None = None,
) -> dict[str, Any]:
    """Enable or disable (flip when `enabled` is omitted) through `schedule_toggle`."""
    info = dashboard.butler(name)
    schedule = await _name_of(dashboard, name, schedule_id)
    arguments: dict[str, Any] = {"name": schedule}
    if body is not None and body.enabled is not None:
        arguments["enabled"] = body.enabled
    outcome = await dashboard.write(
        request, info, "schedule.toggle", "schedule_toggle", arguments, target=schedule
    )
    return ok(Schedule(**outcome.data))
