"""The static registry of modules: every module a roster may enable, by name."""

from butlers.modules.approvals import ApprovalsModule
from butlers.modules.base import Module
from butlers.modules.contacts import ContactsModule
from butlers.modules.email import EmailModule
from butlers.modules.general import GeneralModule
from butlers.modules.health import HealthModule
from butlers.modules.messenger import MessengerModule
from butlers.modules.switchboard import SwitchboardModule
from butlers.modules.telegram import TelegramModule

REGISTRY: dict[str, type[Module]] = {
    module.name: module
    for module in (
        ApprovalsModule,
        ContactsModule,
        EmailModule,
        GeneralModule,
        HealthModule,
        MessengerModule,
        SwitchboardModule,
        TelegramModule,
    )
}
