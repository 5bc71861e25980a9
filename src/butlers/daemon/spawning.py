"""Wiring the spawner and the scheduler into a butler's server, and owning them.

`start_session_services` resolves the runtime from the spec and settings, registers
`trigger`, `tick` and the schedule tools, syncs the spec's schedules and starts the
scheduler loop; `SessionServices.aclose()` stops everything it started.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

from fastmcp import FastMCP

from butlers.daemon.runtime import ButlerRuntime
from butlers.daemon.scheduler import Scheduler
from butlers.daemon.spawner import Spawner
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
from butlers.tools.schedules import register_schedule_tools
from butlers.tools.spawn import SESSION_HIDDEN_TOOLS, register_spawn_tools

log = logging.getLogger(__name__)


@dataclass
class SessionServices:
    spawner: Spawner
    scheduler: Scheduler
    redactor: Redactor

    async def aclose(self) -> None:
        await self.scheduler.aclose()
        await self.spawner.aclose()


def build_session_services(
    mcp: FastMCP,
    runtime: ButlerRuntime,
    settings: ButlerSettings,
    *,
    mcp_url: str,
    jobs: JobRegistry | None = None,
    hidden_tools: tuple[str, ...] = (),
) -> SessionServices:
    """Spawner + scheduler with their tools registered on `mcp` (nothing started)."""
    spec, name = runtime.resource.spec, runtime.name
    config = resolve_runtime_config(name, spec, settings)
    redactor = Redactor(secret_values(spec, settings, config))
    session_runtime = (
        build_session_runtime(
            config,
            open_toolbox=in_memory_toolbox(mcp, name, (*SESSION_HIDDEN_TOOLS, *hidden_tools)),
            mcp_url=mcp_url,
            base_env=dict(settings.environ),
        )
        if config
        else None
    )
    spawner = Spawner(
        butler=name,
        store=SessionStore(runtime.pool),
        runtime=session_runtime,
        not_configured=not_configured_message(name),
        system=spec.instructions,
        timeout_seconds=config.timeout_seconds if config else spec.runtime.timeout_seconds,
        max_turns=config.max_turns if config else spec.runtime.max_turns,
        env=session_env(spec, settings, config),
        redactor=redactor,
    )
    jobs = jobs or builtin_jobs()
    store = ScheduleStore(runtime.pool, partial(_next_due_for, name))
    scheduler = Scheduler(
        butler=name,
        pool=runtime.pool,
        store=store,
        spawner=spawner,
        jobs=jobs,
        interval=settings.tick_interval,
    )
    register_spawn_tools(mcp, spawner, scheduler)
    register_schedule_tools(mcp, store, jobs)
    log.info("runtime: %s", config.adapter if config else "none (trigger is disabled)")
    return SessionServices(spawner=spawner, scheduler=scheduler, redactor=redactor)


async def start_session_services(
    mcp: FastMCP,
    runtime: ButlerRuntime,
    settings: ButlerSettings,
    *,
    mcp_url: str,
    hidden_tools: tuple[str, ...] = (),
) -> SessionServices:
    services = build_session_services(
        mcp, runtime, settings, mcp_url=mcp_url, hidden_tools=hidden_tools
    )
    install_log_redaction(services.redactor)
    await services.scheduler.store.sync_spec(list(runtime.resource.spec.schedules))
    services.scheduler.start()
    return services


def _next_due_for(butler: str, cron: str):  # type: ignore[no-untyped-def]
    return next_due(cron, butler)
