"""Core tools `schedule_create`, `schedule_list`, `schedule_update`, `schedule_delete`,
`schedule_toggle` over the scheduled tasks of this butler.

Creating and changing schedules is closed to LLM sessions (a schedule spends money
and runs jobs on its own, again and again); a job's arguments are validated against
the job's signature before they are stored."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.jsonutil import AnyJson, JsonObject, Prompt, to_json
from butlers.scheduling.jobs import JobRegistry
from butlers.scheduling.validation import ScheduleError, validate_schedule
from butlers.spec import SCHEDULE_NAME_PATTERN
from butlers.stores.schedules import DuplicateSchedule, ScheduledTask, ScheduleStore
from butlers.tooling import tool

CORE = {"module": "core"}
CHANGE = CORE | access_meta(sessions=False)
LIST = CORE | access_meta(operator=True)
Name = Annotated[str, Field(pattern=SCHEDULE_NAME_PATTERN, description="Schedule name.")]
Cron = Annotated[str, Field(description="Five-field cron expression, UTC.")]


def _validated(values: dict[str, Any], jobs: JobRegistry) -> None:
    try:
        validate_schedule(values, jobs)
    except ScheduleError as exc:
        raise ToolError(str(exc)) from None


def _found(row: ScheduledTask | None, name: str) -> AnyJson:
    if row is None:
        raise ToolError(f"no schedule named {name!r} on this butler")
    return to_json(row)


def register_schedule_tools(mcp: FastMCP, store: ScheduleStore, jobs: JobRegistry) -> None:
    @tool(mcp, meta=CHANGE)
    async def schedule_create(
        name: Name,
        cron: Cron,
        prompt: Prompt | None = None,
        job: Annotated[
            str | None, Field(description="A registered job instead of a prompt.")
        ] = None,
        job_args: JsonObject | None = None,
        enabled: bool = True,
    ) -> AnyJson:
        """Create a schedule running a prompt (LLM session) or a job; names are unique."""
        values = {"name": name, "cron": cron, "prompt": prompt, "job": job, "enabled": enabled}
        _validated({**values, "job_args": dict(job_args or {})}, jobs)
        try:
            row = await store.create(
                name=name,
                cron=cron,
                prompt=prompt,
                job_name=job,
                job_args=dict(job_args or {}),
                enabled=enabled,
            )
        except DuplicateSchedule as exc:
            raise ToolError(f"{exc}; use schedule_update to change it") from None
        return to_json(row)

    @tool(mcp, meta=LIST, annotations={"readOnlyHint": True})
    async def schedule_list() -> AnyJson:
        """Every schedule of this butler (from the spec and created at runtime), by name."""
        return to_json(await store.list())

    @tool(mcp, meta=CHANGE)
    async def schedule_update(
        name: Name,
        cron: Cron | None = None,
        prompt: Prompt | None = None,
        enabled: bool | None = None,
        job_args: JsonObject | None = None,
    ) -> AnyJson:
        """Change a schedule's cron (re-arming it), prompt, job arguments or enabled flag."""
        current = await store.get(name)
        if current is None:
            raise ToolError(f"no schedule named {name!r} on this butler")
        changes = {"cron": cron, "prompt": prompt, "enabled": enabled, "job_args": job_args}
        updated: dict[str, Any] = {
            "name": current.name,
            "cron": current.cron,
            "prompt": current.prompt,
            "enabled": current.enabled,
            "job_args": current.job_args,
        }
        updated |= {key: value for key, value in changes.items() if value is not None}
        _validated({**updated, "job": current.job_name}, jobs)
        row = await store.update(name, cron=cron, prompt=prompt, enabled=enabled, job_args=job_args)
        return _found(row, name)

    @tool(mcp, meta=CHANGE, annotations={"destructiveHint": True})
    async def schedule_delete(name: Name) -> AnyJson:
        """Delete a schedule. `deleted` says whether it existed."""
        return {"name": name, "deleted": await store.delete(name)}

    @tool(mcp, meta=CHANGE)
    async def schedule_toggle(name: Name, enabled: bool | None = None) -> AnyJson:
        """Enable or disable a schedule (flip it when `enabled` is omitted)."""
        if enabled is None:
            current = await store.get(name)
            if current is None:
                raise ToolError(f"no schedule named {name!r} on this butler")
            enabled = not current.enabled
        return _found(await store.update(name, enabled=enabled), name)
