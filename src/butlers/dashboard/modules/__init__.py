"""Routers for modules' own tables, mounted after the core routers.

Which module has a router is a static table keyed by names of the static module
registry (`butlers.modules.registry.MODULE_NAMES`; a unit test holds the two
together), so a roster, which enables modules by name, never brings code of its
own. The table is read without importing the modules themselves: the dashboard
never loads the MCP server stack. Each router reads only the butlers that enable
its module.
"""

from __future__ import annotations

import importlib

from fastapi import APIRouter

# module name → "package.module" of its dashboard router (attribute `router`).
MODULE_ROUTERS: dict[str, str] = {
    "contacts": "butlers.dashboard.modules.contacts",
    "general": "butlers.dashboard.modules.general",
    "health": "butlers.dashboard.modules.health",
    "switchboard": "butlers.dashboard.modules.switchboard",
}


def module_routers() -> list[tuple[str, APIRouter]]:
    """(module name, router), by module name."""
    return [
        (name, importlib.import_module(MODULE_ROUTERS[name]).router)
        for name in sorted(MODULE_ROUTERS)
    ]
