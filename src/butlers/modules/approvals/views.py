"""The approvals module's dashboard views: its table as a source of the live feed (the
queue, history, decisions and metrics are routes of their own: `dashboard/routers/approvals.py`
reads them through the store)."""

from butlers.modules.view import Changes, View

VIEWS: tuple[View, ...] = ()

CHANGES = (
    Changes(
        "approvals",
        "id",
        "id, tool_name, session_id, status, requested_at, expires_at, decided_at, decided_by",
        "requested_at >= $1::timestamptz OR decided_at >= $1",
        events={"pending": "approval_requested"},
        default="approval_decided",
        start=("approval_requested", "pending"),
    ),
)
