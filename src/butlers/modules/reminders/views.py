"""The reminders module's dashboard views: every butler's reminders, newest first."""

from butlers.modules.reminders.store import REMINDERS
from butlers.modules.view import Filter, View

VIEWS = (
    View(
        "/api/reminders",
        "Reminder",
        REMINDERS,
        (Filter("status", choices=("pending", "delivered", "failed", "cancelled")),),
        summary="Reminders of every butler, newest first, with their next due time and "
        "delivery count; `status` filters.",
    ),
)
