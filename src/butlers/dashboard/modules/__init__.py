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
MODULE_ROUTERS: dict[str, str] = {}


def module_routers() -> list[APIRouter]:
    from butlers.modules.registry import REGISTRY

    routers = []
    for name in REGISTRY:
        target = MODULE_ROUTERS.get(name)
        if target is not None:
            routers.append(importlib.import_module(target).router)
    return routers
