"""telegram: the inbound connector's cursor and the updates it handed over.

`telegram_cursor` holds, per bot, the next `getUpdates` offset: it advances only after
the switchboard accepted an update, so a restart neither loses nor repeats one (a
repeat the switchboard already holds is a duplicate there). It also keeps the
connector's health (last poll, last error). `telegram_updates` records each update
handed over (or skipped) with the switchboard's request id.

Revision ID: telegram_0001
Revises:
"""

from alembic import op

revision = "telegram_0001"
down_revision = None
branch_labels = ("telegram",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE telegram_cursor (
            bot TEXT PRIMARY KEY,
            next_offset BIGINT NOT NULL DEFAULT 0,
            last_poll_at TIMESTAMPTZ,
            last_error TEXT,
            last_error_at TIMESTAMPTZ,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE telegram_updates (
            bot TEXT NOT NULL,
            update_id BIGINT NOT NULL,
            event_id TEXT,
            chat_id TEXT,
            sender TEXT,
            kind TEXT NOT NULL CHECK (kind IN ('message', 'edit', 'skipped')),
            request_id UUID,
            outcome TEXT NOT NULL
                CHECK (outcome IN ('accepted', 'quarantined', 'duplicate', 'skipped')),
            detail TEXT,
            received_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (bot, update_id)
        )
        """
    )
    op.execute("CREATE INDEX telegram_updates_received_idx ON telegram_updates (received_at DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE telegram_updates")
    op.execute("DROP TABLE telegram_cursor")
