"""Core tools `schedule_create`, `schedule_list`, `schedule_update`, `schedule_delete`,
`schedule_toggle` over the scheduled tasks of this butler.

Creating and changing schedules is closed to LLM sessions (a schedule spends money
and runs jobs on its own, again and again); a job's arguments are validated against
the job's signature before they are stored."""

from __future__ import annotations

from typing import Annotated, Any

from croniter import croniter
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, JsonValue

from butlers.auth.access import access_meta
from butlers.jsonutil import to_json
from butlers.scheduling.jobs import InvalidJobArguments, JobRegistry
from butlers.spec import SCHEDULE_NAME_PATTERN
from butlers.stores.schedules import DuplicateSchedule, ScheduleStore

CORE = {"module": "core"}
CHANGE = CORE | access_meta(sessions=False)
Name = Annotated[str, Field(pattern=SCHEDULE_NAME_PATTERN, description="Schedule name.")]
Cron = Annotated[str, Field(description="Five-field cron expression, UTC.")]


def _check_cron(cron: str) -> None:
    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise ToolError(f"cron {cron!r} is not a five-field cron expression (e.g. '0 8 * * *')")


def _check_job(jobs: JobRegistry, job: str, args: dict[str, Any]) -> None:
    try:
        jobs.validate(job, args)
    except (LookupError, InvalidJobArguments) as exc:
        raise ToolError(str(exc)) from None


def _found(row: dict[str, Any] | None, name: str) -> JsonValue:
    if row is None:
        raise ToolError(f"no schedule named {name!r} on this butler")
    return to_json(row)  # type: ignore[no-any-return]


def register_schedule_tools(mcp: FastMCP, store: ScheduleStore, jobs: JobRegistry) -> None:
    @mcp.tool(meta=CHANGE)
    async def schedule_create(
        name: Name,
        cron: Cron,
        prompt: Annotated[str | None, Field(min_length=1)] = None,
        job: Annotated[
            str | None, Field(description="A registered job instead of a prompt.")
        ] = None,
        job_args: dict[str, JsonValue] | None = None,
        enabled: bool = True,
    ) -> JsonValue:
        """Create a schedule running a prompt (LLM session) or a job; names are unique."""
        _check_cron(cron)
        if (prompt is None) == (job is None):
            raise ToolError("a schedule needs exactly one of 'prompt' or 'job'")
        if job is not None:
            _check_job(jobs, job, dict(job_args or {}))
        elif job_args:
            raise ToolError("job_args belong to a job schedule; this one runs a prompt")
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
        return to_json(row)  # type: ignore[no-any-return]

    @mcp.tool(meta=CORE, annotations={"readOnlyHint": True})
    async def schedule_list() -> JsonValue:
        """Every schedule of this butler (from the spec and created at runtime), by name."""
        return to_json(await store.list())  # type: ignore[no-any-return]

    @mcp.tool(meta=CHANGE)
    async def schedule_update(
        name: Name,
        cron: Cron | None = None,
        prompt: Annotated[str | None, Field(min_length=1)] = None,
        enabled: bool | None = None,
        job_args: dict[str, JsonValue] | None = None,
    ) -> JsonValue:
        """Change a schedule's cron (re-arming it), prompt, job arguments or enabled flag."""
        if cron is not None:
            _check_cron(cron)
        if job_args is not None:
            current = await store.get(name)
            if current is None:
                raise ToolError(f"no schedule named {name!r} on this butler")
            if not current["job_name"]:
                raise ToolError(f"schedule {name!r} runs a prompt; it takes no job_args")
            _check_job(jobs, current["job_name"], dict(job_args))
        row = await store.update(name, cron=cron, prompt=prompt, enabled=enabled, job_args=job_args)
        return _found(row, name)

    @mcp.tool(meta=CHANGE, annotations={"destructiveHint": True})
    async def schedule_delete(name: Name) -> JsonValue:
        """Delete a schedule. `deleted` says whether it existed."""
        return {"name": name, "deleted": await store.delete(name)}

    @mcp.tool(meta=CHANGE)
    async def schedule_toggle(name: Name, enabled: bool | None = None) -> JsonValue:
        """Enable or disable a schedule (flip it when `enabled` is omitted)."""
        if enabled is None:
            current = await store.get(name)
            if current is None:
                raise ToolError(f"no schedule named {name!r} on this butler")
            enabled = not current["enabled"]
        return _found(await store.update(name, enabled=enabled), name)
