"""The switchboard module's dashboard views: its registry, inbox and routing log, and the
inbox as a source of the live feed."""

from butlers.modules.switchboard.store import (
    INBOX,
    INBOX_CHANGES,
    MESSAGE_STATUSES,
    REGISTRY,
    ROUTES,
)
from butlers.modules.view import Filter, View

ROUTE_STATUSES = ("success", "error", "timeout", "target_unavailable")

VIEWS = (
    View(
        "/api/switchboard/registry",
        "RegistryEntry",
        REGISTRY,
        kind="list",
        summary="Butlers registered with the switchboard and whether their heartbeat is recent.",
    ),
    View(
        "/api/switchboard/messages",
        "InboxMessage",
        INBOX,
        (Filter("status", choices=MESSAGE_STATUSES), Filter("fallback", type=bool)),
        summary="Incoming messages, newest first; `fallback=true`: those whose classification was"
        "\nunusable (routed to the fallback butler), with the reason.",
    ),
    View(
        "/api/switchboard/routing-log",
        "Route",
        ROUTES,
        (Filter("target"), Filter("status", choices=ROUTE_STATUSES)),
        summary="Every route of every message, newest first.",
    ),
)

CHANGES = (INBOX_CHANGES,)
