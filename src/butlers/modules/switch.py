"""The owner switching a module of `spec.modules` off and on while the butler runs.

Switching off records the override (`disabled_modules`, so the loader honours it at
the next start), stops the module (its pollers and loops), takes its tools off the
server and what it put into the shared services out (channels, briefings, webhooks;
its jobs are parked, so schedules naming them fail with the reason instead of
running), then refreshes the butler's tool tables (access, sessions' tools, the
direct call path). Switching on deletes the override and starts it as the loader
would. A required module (`Module.required`) and one that a module still on depends
on are refused, naming why; so is switching on a module whose dependency is not active.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.auth.middleware import current_caller
from butlers.core.context import ButlerContext, ModuleState
from butlers.jsonutil import AnyJson
from butlers.modules.loader import ModuleSet, disabled_state, off_reason, start_one
from butlers.modules.registry import MODULE_NAMES, module_class
from butlers.stores.modules import disable_module, enable_module
from butlers.tooling import tool

log = logging.getLogger(__name__)
Refresh = Callable[[], Awaitable[None]]


class SwitchRefused(Exception):
    """The owner may not switch this module now; the message says why and what to do."""


class ModuleSwitch:
    """Switches the modules of one butler; one switch at a time."""

    def __init__(
        self, mcp: FastMCP, butler: ButlerContext, modules: ModuleSet, refresh: Refresh
    ) -> None:
        self._mcp = mcp
        self._butler = butler
        self._modules = modules
        self.refresh = refresh
        self._lock = asyncio.Lock()

    def _state(self, name: str) -> ModuleState | None:
        return next((m for m in self._butler.modules if m.name == name), None)

    async def set_enabled(self, name: str, enabled: bool, *, by: str) -> ModuleState:
        """Switch `name` on or off (a no-op when it already is); its state after."""
        spec = self._butler.resource.spec.modules
        state = self._state(name)
        if name not in spec or state is None:
            listed = ", ".join(sorted(spec)) or "none"
            raise SwitchRefused(
                f"{name!r} is not in spec.modules of butler {self._butler.name!r} "
                f"(its modules: {listed}); add it to the Butler resource to enable it"
            )
        if name not in MODULE_NAMES:
            raise SwitchRefused(f"{name!r} is not a known module ({state.error})")
        async with self._lock:
            if enabled and state.status == "disabled":
                await self._enable(name, state)
            elif not enabled and state.status != "disabled":
                await self._disable(name, state, by)
            return state

    async def _disable(self, name: str, state: ModuleState, by: str) -> None:
        cls = module_class(name)
        dependants = [
            m.name
            for m in self._butler.modules
            if m.name in MODULE_NAMES
            and m.status != "disabled"
            and name in module_class(m.name).dependencies
        ]
        if dependants:
            raise SwitchRefused(
                f"module {name} cannot be switched off: {', '.join(dependants)} "
                f"depend{'s' if len(dependants) == 1 else ''} on it; switch "
                f"{'it' if len(dependants) == 1 else 'them'} off first"
            )
        if cls.required:
            raise SwitchRefused(
                f"module {name} is required and cannot be switched off at runtime: "
                f"{cls.required}; remove it from spec.modules to go without it"
            )
        row = await disable_module(self._butler.pool, name, by)
        await self._modules.stop_one(self._mcp, name, off_reason(name))
        _assign(state, disabled_state(name, row))
        log.info("module %s switched off by %s", name, by)
        await self._changed(name)

    async def _enable(self, name: str, state: ModuleState) -> None:
        cls = module_class(name)
        waiting = [
            f"{dep} ({dep_state.status if dep_state else 'not in spec.modules'})"
            for dep in cls.dependencies
            if (dep_state := self._state(dep)) is None or dep_state.status != "active"
        ]
        if waiting:
            raise SwitchRefused(
                f"module {name} cannot be switched on: it needs {', '.join(waiting)}; "
                "switch that on first"
            )
        await enable_module(self._butler.pool, name)
        raw = self._butler.resource.spec.modules[name]
        started = await start_one(self._mcp, self._butler, cls, raw, self._modules)
        entry = self._modules.instance(name)
        if started.status == "active" and entry is not None:
            try:
                await entry[0].ready(self._mcp, entry[1])
            except Exception as exc:
                log.exception("module %s failed in its ready hook", name)
                started.status, started.phase, started.error = "failed", "ready", f"{exc}"
        started.required = cls.required
        _assign(state, started)
        log.info("module %s switched on: %s", name, state.status)
        await self._changed(name)

    async def _changed(self, name: str) -> None:
        """The tool tables, then every other running module, learn the new tool set."""
        await self.refresh()
        for module, ctx in list(self._modules.started):
            if ctx.name == name:
                continue
            try:
                await module.tools_changed(self._mcp, ctx)
            except Exception:
                log.exception("module %s failed to take in the new tool set", ctx.name)


def _assign(state: ModuleState, new: ModuleState) -> None:
    """Update `state` in place (`ButlerContext.modules` keeps its order and objects)."""
    for field in ("status", "phase", "error", "disabled_by", "disabled_at", "required"):
        setattr(state, field, getattr(new, field))


def register_switch_tool(mcp: FastMCP, switch: ModuleSwitch) -> None:
    """`module_set_enabled`: the owner's switch (closed to sessions and other butlers:
    a session never changes what its butler can do)."""

    @tool(mcp, meta={"module": "core", **access_meta(sessions=False)})
    async def module_set_enabled(
        module: Annotated[str, Field(min_length=1, max_length=100, description="Module name.")],
        enabled: Annotated[bool, Field(description="False switches it off until switched on.")],
    ) -> AnyJson:
        """Switch a module of spec.modules off or on while the butler runs (kept across
        restarts): its tools, background work and jobs go or come back; its state after."""
        try:
            state = await switch.set_enabled(module, enabled, by=current_caller().label)
        except SwitchRefused as exc:
            raise ToolError(str(exc)) from None
        return state.to_json()
