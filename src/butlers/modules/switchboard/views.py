"""The switchboard module's dashboard views: its registry, inbox and routing log, and the
inbox as a source of the live feed."""

from butlers.modules.switchboard.store import INBOX, REGISTRY, ROUTES
from butlers.modules.view import Changes, Filter, View

MESSAGE_STATUSES = ("accepted", "classified", "dispatched", "partial", "failed")
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

CHANGES = (
    Changes(
        "message_inbox",
        "request_id",
        "request_id, channel, status, trace_id, received_at, completed_at",
        "received_at >= $1::timestamptz - interval '1 day' "
        "AND (received_at >= $1 OR completed_at >= $1)",
        events={"accepted": "message_accepted", "classified": "message_classified"},
        default="message_done",
        start=("message_accepted", "accepted"),
    ),
)
