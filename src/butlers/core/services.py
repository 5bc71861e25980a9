"""Building a butler's session services (spawner and scheduler), and owning them.

`build_session_services` resolves the runtime from the spec and settings and builds
the spawner and the scheduler (nothing started, no tool registered: the daemon
registers `trigger`, `tick` and the schedule tools over them). `sync_schedules()`
upserts the spec's schedules, `start()` starts the scheduler loop, `aclose()` stops
everything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from butlers.core.context import ButlerContext
from butlers.core.scheduler import Scheduler
from butlers.core.spawner import Spawner
from butlers.llm.config import (
    build_session_runtime,
    not_configured_message,
    resolve_runtime_config,
    secret_values,
    session_env,
)
from butlers.llm.toolbox import ToolServer, session_toolboxes
from butlers.pricing import price_table
from butlers.redaction import Redactor, install_log_redaction
from butlers.scheduling.cron import next_due
from butlers.scheduling.jobs import JobRegistry, builtin_jobs
from butlers.scheduling.validation import check_jobs
from butlers.settings import ButlerSettings
from butlers.spec import ScheduleSpec
from butlers.stores.schedules import ScheduleStore
from butlers.stores.sessions import SessionStore

log = logging.getLogger(__name__)


@dataclass
class SessionServices:
    spawner: Spawner
    scheduler: Scheduler
    redactor: Redactor
    jobs: JobRegistry

    async def sync_schedules(self, schedules: Sequence[ScheduleSpec]) -> None:
        """Upsert the spec's schedules into `scheduled_tasks` (idempotent); a `job` schedule
        naming no registered job, or with arguments its job refuses, is a `ScheduleError`
        naming it (nothing is written)."""
        check_jobs(schedules, self.jobs, source="spec.schedules")
        await self.scheduler.store.sync_spec(list(schedules))

    async def start(self) -> None:
        """Mask secrets in this process's logs, mark sessions a dead process left `running`
        as interrupted, start the scheduler loop."""
        install_log_redaction(self.redactor)
        await self.spawner.recover()
        self.scheduler.start()

    async def aclose(self) -> None:
        await self.scheduler.aclose()
        await self.spawner.aclose()


def build_session_services(
    tools: ToolServer,
    butler: ButlerContext,
    settings: ButlerSettings,
    *,
    mcp_url: str,
    jobs: JobRegistry | None = None,
) -> SessionServices:
    """Spawner + scheduler of `butler`; sessions list and call through `tools` (the
    butler's own server, as it shows itself to a session)."""
    spec, name = butler.resource.spec, butler.name
    config = resolve_runtime_config(name, spec, settings)
    redactor = Redactor(secret_values(spec, settings, config))
    session_runtime = (
        build_session_runtime(
            config,
            open_toolbox=session_toolboxes(tools, name),
            mcp_url=mcp_url,
            base_env=dict(settings.environ),
            tokens=butler.tokens,
        )
        if config
        else None
    )
    spawner = Spawner(
        butler=name,
        store=SessionStore(butler.pool),
        runtime=session_runtime,
        not_configured=not_configured_message(name),
        system=spec.instructions,
        timeout_seconds=config.timeout_seconds if config else spec.runtime.timeout_seconds,
        max_turns=config.max_turns if config else spec.runtime.max_turns,
        env=session_env(spec, settings, config),
        redactor=redactor,
        prices=price_table(settings.prices),
        max_queued=spec.runtime.max_queued_sessions or settings.max_queued_sessions,
    )
    butler.session_activity = spawner.activity
    jobs = jobs or builtin_jobs()
    store = ScheduleStore(butler.pool, partial(_next_due_for, name))
    scheduler = Scheduler(
        butler=name,
        pool=butler.pool,
        store=store,
        spawner=spawner,
        jobs=jobs,
        interval=settings.tick_interval,
    )
    log.info("runtime: %s", config.adapter if config else "none (trigger is disabled)")
    return SessionServices(spawner=spawner, scheduler=scheduler, redactor=redactor, jobs=jobs)


def _next_due_for(butler: str, cron: str) -> datetime:
    return next_due(cron, butler)
