"""Starting a butler's enabled modules in dependency order, isolating failures."""

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastmcp import FastMCP
from pydantic import ValidationError

from butlers.core.context import ButlerContext, ModuleState
from butlers.migrations import CORE, Chain
from butlers.modules.base import Module, ModuleConfig, ModuleContext, ModuleError, ModuleServices
from butlers.modules.registry import MODULE_NAMES, module_class
from butlers.stores.modules import DisabledModule
from butlers.validation import describe

log = logging.getLogger(__name__)
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class DependencyCycleError(Exception):
    pass


def dependency_order(enabled: Mapping[str, Any]) -> list[str]:
    """Enabled known modules, each after the enabled modules it depends on (imports
    only the enabled modules)."""
    known = [name for name in enabled if name in MODULE_NAMES]
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in visiting:
            raise DependencyCycleError(" -> ".join((*path, name)))
        visiting.add(name)
        cls = module_class(name)
        for dep in (*cls.dependencies, *cls.optional_dependencies):
            if dep in enabled and dep in MODULE_NAMES:
                visit(dep, (*path, name))
        visiting.discard(name)
        order.append(name)

    for name in sorted(known):
        visit(name, ())
    return order


def module_chains(enabled: Mapping[str, Any]) -> list[Chain]:
    """Migration chains of the enabled modules, in dependency order."""
    try:
        names = dependency_order(enabled)
    except DependencyCycleError:
        names = sorted(n for n in enabled if n in MODULE_NAMES)
    return [chain for name in names if (chain := module_class(name).chain) is not None]


def butler_chains(enabled: Mapping[str, Any]) -> list[Chain]:
    """The migration chains of a butler enabling `enabled`: core, then its modules' chains
    (the one definition: `butlers up`, `migrate --spec`, a butler's `/ready`)."""
    return [CORE, *module_chains(enabled)]


def session_hidden_tools(enabled: Mapping[str, Any]) -> tuple[str, ...]:
    """Tools of the enabled modules that the butler's LLM sessions must not see."""
    return tuple(
        tool
        for name in sorted(enabled)
        if name in MODULE_NAMES
        for tool in module_class(name).session_hidden_tools
    )


def session_tool_tiers(enabled: Mapping[str, Any]) -> dict[str, str]:
    """How the butler's sessions get each enabled module's tools (`llm.offer`): the
    module's `sessionTools` when set, else its class's `session_tools`. A configuration
    that does not validate says nothing: that module fails at start."""
    tiers: dict[str, str] = {}
    for name, raw in enabled.items():
        if name not in MODULE_NAMES:
            continue
        module = module_class(name)
        try:
            config = module.config_model.model_validate(raw or {})
        except ValidationError:
            config = None
        chosen = getattr(config, "session_tools", None) if config is not None else None
        tiers[name] = chosen or module.session_tools
    return tiers


def module_env_names(enabled: Mapping[str, Any]) -> set[str]:
    """The environment variables the enabled modules' configurations name (credentials).
    A configuration that does not validate names none: that module fails at start."""
    names: set[str] = set()
    for name, raw in enabled.items():
        if name not in MODULE_NAMES:
            continue
        module = module_class(name)
        try:
            config = module.config_model.model_validate(raw or {})
        except ValidationError:
            continue
        if isinstance(config, ModuleConfig):
            names |= config.env_names()
    return names


def _config_error(name: str, exc: ValidationError) -> str:
    return f"spec.modules.{name}: {describe(exc.errors(), '(config)')}"


@dataclass
class Owned:
    """What one module put into the shared services when it started (taken out again
    when the owner switches it off)."""

    tools: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    webhooks: tuple[str, ...] = ()
    briefings: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()
    approver: bool = False
    outbound: bool = False


def _keys(services: ModuleServices) -> tuple[set[str], ...]:
    return (
        set(services.channels),
        set(services.webhooks),
        set(services.briefings),
        set(services.jobs.names()),
    )


@dataclass
class ModuleSet:
    """The started modules of one butler; owns their shutdown."""

    butler: ButlerContext
    services: ModuleServices
    started: list[tuple[Module, ModuleContext]] = field(default_factory=list)
    owned: dict[str, Owned] = field(default_factory=dict)

    def instance(self, name: str) -> tuple[Module, ModuleContext] | None:
        return next((entry for entry in self.started if entry[1].name == name), None)

    async def stop_one(self, mcp: FastMCP, name: str, reason: str) -> None:
        """Stop the started module `name`, take its tools off `mcp` and what it owned
        out of the services (its jobs parked with `reason`)."""
        entry = self.instance(name)
        if entry is not None:
            self.started.remove(entry)
            await _stop_quietly(entry[0])
        owned = self.owned.pop(name, Owned())
        registered = {t.name for t in await mcp.list_tools(run_middleware=False)}
        for tool in owned.tools:
            if tool in registered:
                mcp.local_provider.remove_tool(tool)
        services = self.services
        for key in owned.channels:
            services.channels.pop(key, None)
        for key in owned.webhooks:
            services.webhooks.pop(key, None)
        for key in owned.briefings:
            services.briefings.pop(key, None)
        for job in owned.jobs:
            services.jobs.park(job, reason)
        if owned.approver:
            services.approver = None
        if owned.outbound:
            services.outbound = None

    async def credentials_changed(self, names: frozenset[str]) -> None:
        """Tell every started module which credentials now resolve to other values."""
        for module, ctx in list(self.started):  # a module may be switched off meanwhile
            try:
                async with asyncio.timeout(START_TIMEOUT):
                    await module.credentials_changed(ctx, names)
            except Exception:
                log.exception("module %s failed to take changed credentials", ctx.name)

    async def stop(self) -> None:
        for module, ctx in reversed(self.started):
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await module.stop()
            except Exception:
                log.exception("module %s did not stop cleanly", ctx.name)
        self.started.clear()


def disabled_state(name: str, row: DisabledModule) -> ModuleState:
    """The state of a module the owner switched off."""
    return ModuleState(
        name,
        "disabled",
        disabled_by=row.disabled_by,
        disabled_at=row.disabled_at.isoformat(),
    )


def off_reason(name: str) -> str:
    return f"module {name} is disabled by the owner (dashboard: the butler's modules)"


async def start_modules(
    mcp: FastMCP,
    butler: ButlerContext,
    services: ModuleServices,
    disabled: Mapping[str, DisabledModule] | None = None,
) -> ModuleSet:
    """Start every enabled module the owner did not switch off (`disabled`, the
    `disabled_modules` rows); record each outcome in `butler.modules`."""
    enabled = butler.resource.spec.modules
    disabled = disabled or {}
    modules = ModuleSet(butler=butler, services=services)
    states: dict[str, ModuleState] = {}

    def record(state: ModuleState) -> None:
        if state.name in MODULE_NAMES:
            state.required = module_class(state.name).required
        states[state.name] = state
        butler.modules.append(state)
        if state.status == "disabled":
            log.info("Module %s is disabled by %s", state.name, state.disabled_by)
        elif state.status != "active":
            log.warning(
                "Module %s %s (phase %s): %s", state.name, state.status, state.phase, state.error
            )

    for name in enabled:
        if name not in MODULE_NAMES:
            record(
                ModuleState(
                    name,
                    "failed",
                    "config",
                    f"unknown module {name!r}; known modules: {', '.join(sorted(MODULE_NAMES))}",
                )
            )
    try:
        order = dependency_order(enabled)
    except DependencyCycleError as exc:
        for name in enabled:
            if name not in states:
                record(ModuleState(name, "failed", "dependencies", f"dependency cycle: {exc}"))
        return modules

    for name in order:
        cls = module_class(name)
        if name in disabled and cls.required:
            log.warning("module %s is required (%s): its override is ignored", name, cls.required)
        elif name in disabled:
            for job in cls.owned_jobs:
                services.jobs.park(job, off_reason(name))
            record(disabled_state(name, disabled[name]))
            continue
        missing = [d for d in cls.dependencies if d not in enabled]
        if missing:
            record(
                ModuleState(
                    name,
                    "failed",
                    "dependencies",
                    f"needs module(s) {', '.join(missing)}, not enabled in spec.modules",
                )
            )
            continue
        broken = [d for d in cls.dependencies if states[d].status != "active"]
        if broken:
            record(
                ModuleState(
                    name,
                    "cascade_failed",
                    "dependencies",
                    f"depends on {', '.join(broken)}, which "
                    + ("is disabled" if _all_disabled(broken, states) else "did not start"),
                )
            )
            continue
        state = await start_one(mcp, butler, cls, enabled[name], modules)
        record(state)

    for module, ctx in modules.started:
        try:
            await module.ready(mcp, ctx)
        except Exception as exc:
            log.exception("module %s failed in its ready hook", ctx.name)
            state = states[ctx.name]
            state.status, state.phase, state.error = "failed", "ready", f"{exc}"
    return modules


def _all_disabled(names: list[str], states: Mapping[str, ModuleState]) -> bool:
    return all(states[n].status == "disabled" for n in names)


async def start_one(
    mcp: FastMCP, butler: ButlerContext, cls: type[Module], raw: Any, modules: ModuleSet
) -> ModuleState:
    """Start one module, noting what it put into the shared services."""
    services = modules.services
    before, approver, outbound = _keys(services), services.approver, services.outbound
    tools = {t.name for t in await mcp.list_tools(run_middleware=False)}
    state = await _start_one(mcp, butler, cls, raw, modules)
    added = {t.name for t in await mcp.list_tools(run_middleware=False)} - tools
    after = _keys(services)
    channels, webhooks, briefings, jobs = (
        tuple(sorted(a - b)) for a, b in zip(after, before, strict=True)
    )
    modules.owned[cls.name] = Owned(
        tools=tuple(sorted(added)),
        channels=channels,
        webhooks=webhooks,
        briefings=briefings,
        jobs=jobs,
        approver=services.approver is not approver,
        outbound=services.outbound is not outbound,
    )
    return state


async def _start_one(
    mcp: FastMCP, butler: ButlerContext, cls: type[Module], raw: Any, modules: ModuleSet
) -> ModuleState:
    name = cls.name
    try:
        config = cls.config_model.model_validate(raw or {})
    except ValidationError as exc:
        return ModuleState(name, "failed", "config", _config_error(name, exc))
    module = cls()
    ctx = ModuleContext(name=name, butler=butler, config=config, services=modules.services)
    try:
        async with asyncio.timeout(START_TIMEOUT):
            await module.start(ctx)
    except ModuleError as exc:
        await _stop_quietly(module)
        return ModuleState(name, "failed", exc.phase, str(exc))
    except TimeoutError:
        await _stop_quietly(module)
        return ModuleState(name, "failed", "startup", f"did not start within {START_TIMEOUT:.0f} s")
    except Exception as exc:
        log.exception("module %s failed to start", name)
        await _stop_quietly(module)
        return ModuleState(name, "failed", "startup", f"{exc.__class__.__name__}: {exc}")
    modules.started.append((module, ctx))
    try:
        module.register_tools(mcp, ctx)
    except Exception as exc:
        log.exception("module %s failed to register its tools", name)
        return ModuleState(name, "failed", "tools", f"{exc.__class__.__name__}: {exc}")
    return ModuleState(name, "active")


async def _stop_quietly(module: Module) -> None:
    try:
        async with asyncio.timeout(STOP_TIMEOUT):
            await module.stop()
    except Exception:
        log.exception("module %s did not stop cleanly", module.name)
