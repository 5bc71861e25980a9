"""The approvals module's dashboard views: its table as a source of the live feed (the
queue, history, decisions and metrics are routes of their own: `dashboard/routers/approvals.py`
reads them through the store)."""

from butlers.modules.approvals.store import APPROVAL_CHANGES
from butlers.modules.view import View

VIEWS: tuple[View, ...] = ()

CHANGES = (APPROVAL_CHANGES,)
