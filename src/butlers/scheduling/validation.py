"""The one validation of a schedule, wherever it comes from.

A roster's `spec.schedules` and the `schedule_create`/`schedule_update` tools all go
through `ScheduleSpec` (name pattern, five-field cron, exactly one of prompt or job)
and then through the butler's job registry (a `job` schedule must name a registered
job). The message names what to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from butlers.errors import ButlersError
from butlers.roster import format_validation_error
from butlers.scheduling.jobs import InvalidJobArguments, JobRegistry, UnknownJob
from butlers.spec import ScheduleSpec


class ScheduleError(ButlersError, ValueError):
    """A schedule that cannot run; the message names the field and the problem."""


def validate_schedule(
    values: Mapping[str, Any], jobs: JobRegistry, *, source: str = "schedule"
) -> ScheduleSpec:
    """`values` (camelCase or snake_case keys) as a `ScheduleSpec` this butler can run."""
    try:
        schedule = ScheduleSpec.model_validate(dict(values))
    except ValidationError as exc:
        raise ScheduleError(format_validation_error(source, exc).replace("\n", "; ")) from None
    check_jobs([schedule], jobs, source=source)
    return schedule


def check_jobs(schedules: Sequence[ScheduleSpec], jobs: JobRegistry, *, source: str) -> None:
    """Every `job` schedule names a registered job and gives it arguments it accepts."""
    for index, schedule in enumerate(schedules):
        if schedule.job is None:
            continue
        try:
            jobs.validate(schedule.job, schedule.job_args)
        except (UnknownJob, InvalidJobArguments) as exc:
            where = source if source == "schedule" else f"{source}[{index}]"
            field = "job" if isinstance(exc, UnknownJob) else "jobArgs"
            raise ScheduleError(f"{where}.{field}: {exc}") from None
