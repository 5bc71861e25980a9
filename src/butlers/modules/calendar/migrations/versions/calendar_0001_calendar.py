"""calendar sources, events (the server's iCalendar objects) and their expanded instances.

Revision ID: calendar_0001
Revises:
"""

from alembic import op

revision = "calendar_0001"
down_revision = None
branch_labels = ("calendar",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE calendar_sources (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            href TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            color TEXT,
            writable BOOLEAN NOT NULL DEFAULT TRUE,
            ctag TEXT,
            sync_token TEXT,
            last_synced_at TIMESTAMPTZ,
            last_error TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE calendar_events (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            source_id UUID NOT NULL REFERENCES calendar_sources (id) ON DELETE CASCADE,
            href TEXT NOT NULL,
            uid TEXT NOT NULL,
            etag TEXT,
            ics TEXT NOT NULL,
            summary TEXT NOT NULL DEFAULT '',
            description TEXT,
            location TEXT,
            starts_at TIMESTAMPTZ NOT NULL,
            ends_at TIMESTAMPTZ NOT NULL,
            all_day BOOLEAN NOT NULL DEFAULT FALSE,
            timezone TEXT,
            rrule TEXT,
            status TEXT,
            organizer TEXT,
            attendees JSONB NOT NULL DEFAULT '[]',
            alarms JSONB NOT NULL DEFAULT '[]',
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            UNIQUE (source_id, href)
        )
        """
    )
    op.execute("CREATE INDEX calendar_events_uid_idx ON calendar_events (uid)")
    op.execute(
        """
        CREATE TABLE calendar_event_instances (
            event_id UUID NOT NULL REFERENCES calendar_events (id) ON DELETE CASCADE,
            starts_at TIMESTAMPTZ NOT NULL,
            ends_at TIMESTAMPTZ NOT NULL,
            recurrence_id TEXT,
            summary TEXT NOT NULL DEFAULT '',
            location TEXT,
            PRIMARY KEY (event_id, starts_at)
        )
        """
    )
    op.execute(
        "CREATE INDEX calendar_instances_range_idx ON calendar_event_instances (starts_at, ends_at)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE calendar_event_instances")
    op.execute("DROP TABLE calendar_events")
    op.execute("DROP TABLE calendar_sources")
