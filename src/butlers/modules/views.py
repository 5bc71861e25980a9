"""The static table of modules' dashboard views: module name → its `views` module.

Beside the registry of classes (`registry.py`) and keyed by the same names (a unit test
holds the two together), so the dashboard reads views and stores without importing any
module's `module.py`, FastMCP or the MCP SDK. Each loader imports one `views` module
explicitly, so import-linter sees every edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from butlers.modules.view import Changes, View


@dataclass(frozen=True)
class ModuleViews:
    module: str
    views: tuple[View, ...] = ()
    changes: tuple[Changes, ...] = ()


def _approvals() -> ModuleViews:
    from butlers.modules.approvals import views

    return ModuleViews("approvals", views.VIEWS, views.CHANGES)


def _contacts() -> ModuleViews:
    from butlers.modules.contacts import views

    return ModuleViews("contacts", views.VIEWS)


def _general() -> ModuleViews:
    from butlers.modules.general import views

    return ModuleViews("general", views.VIEWS)


def _health() -> ModuleViews:
    from butlers.modules.health import views

    return ModuleViews("health", views.VIEWS)


def _memory() -> ModuleViews:
    from butlers.modules.memory import views

    return ModuleViews("memory", views.VIEWS)


def _reminders() -> ModuleViews:
    from butlers.modules.reminders import views

    return ModuleViews("reminders", views.VIEWS)


def _switchboard() -> ModuleViews:
    from butlers.modules.switchboard import views

    return ModuleViews("switchboard", views.VIEWS, views.CHANGES)


MODULE_VIEWS: dict[str, Callable[[], ModuleViews]] = {
    "approvals": _approvals,
    "contacts": _contacts,
    "general": _general,
    "health": _health,
    "memory": _memory,
    "reminders": _reminders,
    "switchboard": _switchboard,
}


def all_module_views() -> list[ModuleViews]:
    """Every module's views, by module name."""
    return [MODULE_VIEWS[name]() for name in sorted(MODULE_VIEWS)]
