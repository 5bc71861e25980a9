"""calendar: each instance keeps its listing entry as JSON text, built when it is written.

`calendar_list_events` then joins stored text (`string_agg`) instead of building ~300
JSON objects per month at every read; the calendar's own fields (name, id, writable)
are spliced in at read time, so a renamed calendar needs no rewrite. Existing rows are
filled here; `CalendarStore.save` fills new ones in the same transaction.

Revision ID: calendar_0003
Revises: calendar_0002
"""

from alembic import op

revision = "calendar_0003"
down_revision = "calendar_0002"
branch_labels = None
depends_on = None


def _utc(column: str) -> str:
    return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')"""


# As `store.ITEM_SQL` was written at this revision.
ITEM = f"""json_build_object(
    'event_id', i.event_id, 'uid', e.uid, 'summary', i.summary, 'location', i.location,
    'description', e.description, 'starts_at', {_utc("i.starts_at")},
    'ends_at', {_utc("i.ends_at")}, 'all_day', e.all_day,
    'recurring', e.rrule IS NOT NULL, 'recurrence_id', i.recurrence_id,
    'timezone', e.timezone, 'status', e.status, 'organizer', e.organizer,
    'attendees', e.attendees, 'alarms', e.alarms, 'updated_at', {_utc("e.updated_at")}
)::text"""


def upgrade() -> None:
    op.execute("ALTER TABLE calendar_event_instances ADD COLUMN item TEXT")
    op.execute(
        f"UPDATE calendar_event_instances i SET item = {ITEM} "
        "FROM calendar_events e WHERE e.id = i.event_id"
    )
    op.execute("ALTER TABLE calendar_event_instances ALTER COLUMN item SET NOT NULL")


def downgrade() -> None:
    op.execute("ALTER TABLE calendar_event_instances DROP COLUMN item")
