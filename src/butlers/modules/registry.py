"""The static registry of modules: every module a roster may enable, by name.

A module's package is imported only when its class is asked for (`module_class`), so a
butler imports the modules it enables and no other (the email module alone brings
`imaplib`, `smtplib` and the `email` package); names (`MODULE_NAMES`) import nothing.
Each name has its own function with an explicit import, so the registry stays a static
table that tools (mypy, import-linter) read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from butlers.modules.base import Module


def _approvals() -> type[Module]:
    from butlers.modules.approvals.module import ApprovalsModule

    return ApprovalsModule


def _calendar() -> type[Module]:
    from butlers.modules.calendar.module import CalendarModule

    return CalendarModule


def _contacts() -> type[Module]:
    from butlers.modules.contacts.module import ContactsModule

    return ContactsModule


def _email() -> type[Module]:
    from butlers.modules.email.module import EmailModule

    return EmailModule


def _general() -> type[Module]:
    from butlers.modules.general.module import GeneralModule

    return GeneralModule


def _health() -> type[Module]:
    from butlers.modules.health.module import HealthModule

    return HealthModule


def _memory() -> type[Module]:
    from butlers.modules.memory.module import MemoryModule

    return MemoryModule


def _messenger() -> type[Module]:
    from butlers.modules.messenger.module import MessengerModule

    return MessengerModule


def _reminders() -> type[Module]:
    from butlers.modules.reminders.module import RemindersModule

    return RemindersModule


def _switchboard() -> type[Module]:
    from butlers.modules.switchboard.module import SwitchboardModule

    return SwitchboardModule


def _telegram() -> type[Module]:
    from butlers.modules.telegram.module import TelegramModule

    return TelegramModule


_CLASSES: dict[str, Callable[[], type[Module]]] = {
    "approvals": _approvals,
    "calendar": _calendar,
    "contacts": _contacts,
    "email": _email,
    "general": _general,
    "health": _health,
    "memory": _memory,
    "messenger": _messenger,
    "reminders": _reminders,
    "switchboard": _switchboard,
    "telegram": _telegram,
}

MODULE_NAMES: frozenset[str] = frozenset(_CLASSES)


def module_class(name: str) -> type[Module]:
    """The class of the module registered as `name` (its package imported now).

    Raises KeyError for a name not in `MODULE_NAMES`."""
    return _CLASSES[name]()


def all_module_classes() -> list[type[Module]]:
    """Every registered module's class, by name (imports every module: for tools and
    tests that cover all modules, never for a butler)."""
    return [_CLASSES[name]() for name in sorted(_CLASSES)]
