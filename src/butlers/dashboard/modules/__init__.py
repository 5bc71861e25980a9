"""Routers for modules' own tables, mounted after the core routers.

Which module has a router is a static table keyed by the names of the static
module registry (`butlers.modules.registry.REGISTRY`), mounted in the registry's
order: a roster enables modules by name and never brings code of its own. Each
router reads only the butlers that enable its module.
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
    """(module name, router) in the registry's order."""
    from butlers.modules.registry import REGISTRY

    routers = []
    for name in REGISTRY:
        target = MODULE_ROUTERS.get(name)
        if target is not None:
            routers.append((name, importlib.import_module(target).router))
    return routers
