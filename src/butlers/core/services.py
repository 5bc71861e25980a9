"""Building a butler's session services (spawner and scheduler), and owning them.

`build_session_services` resolves the runtime from the spec and settings and builds
the spawner and the scheduler (nothing started, no tool registered: the daemon
registers `trigger`, `tick` and the schedule tools over them). `start()` syncs the
spec's schedules and starts the scheduler loop; `aclose()` stops everything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from fastmcp import FastMCP

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
from butlers.llm.toolbox import in_memory_toolbox
from butlers.redaction import Redactor, install_log_redaction
from butlers.scheduling.cron import next_due
from butlers.scheduling.jobs import JobRegistry, builtin_jobs
from butlers.settings import ButlerSettings
from butlers.stores.schedules import ScheduleStore
from butlers.stores.sessions import SessionStore

log = logging.getLogger(__name__)
# Tools an LLM session must not see: they start sessions themselves.
SESSION_HIDDEN_TOOLS = ("trigger", "tick")


@dataclass
class SessionServices:
    spawner: Spawner
    scheduler: Scheduler
    redactor: Redactor
    jobs: JobRegistry

    async def start(self, butler: ButlerContext) -> None:
        """Mask secrets in logs, sync the spec's schedules, start the scheduler loop."""
        install_log_redaction(self.redactor)
        await self.scheduler.store.sync_spec(list(butler.resource.spec.schedules))
        self.scheduler.start()

    async def aclose(self) -> None:
        await self.scheduler.aclose()
        await self.spawner.aclose()


def build_session_services(
    server: FastMCP,
    butler: ButlerContext,
    settings: ButlerSettings,
    *,
    mcp_url: str,
    jobs: JobRegistry | None = None,
    hidden_tools: tuple[str, ...] = (),
) -> SessionServices:
    """Spawner + scheduler of `butler`; sessions see `server`'s tools minus the hidden ones."""
    spec, name = butler.resource.spec, butler.name
    config = resolve_runtime_config(name, spec, settings)
    redactor = Redactor(secret_values(spec, settings, config))
    session_runtime = (
        build_session_runtime(
            config,
            open_toolbox=in_memory_toolbox(server, name, (*SESSION_HIDDEN_TOOLS, *hidden_tools)),
            mcp_url=mcp_url,
            base_env=dict(settings.environ),
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
    )
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
