"""switchboard: the inbox as a recoverable state machine.

`attempts` counts how often processing of a message started (the first time and each
recovery), `error` says why a message was given up, `updated_at` is its last
transition. The recovery sweep picks messages still `accepted` or `classified` that
no live task is processing.

Revision ID: switchboard_0002
Revises: switchboard_0001
"""

from alembic import op

revision = "switchboard_0002"
down_revision = "switchboard_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE message_inbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1")
    op.execute("ALTER TABLE message_inbox ADD COLUMN error TEXT")
    op.execute(
        "ALTER TABLE message_inbox ADD COLUMN updated_at TIMESTAMPTZ NOT NULL "
        "DEFAULT clock_timestamp()"
    )
    op.execute(
        "CREATE INDEX message_inbox_open_idx ON message_inbox (received_at) "
        "WHERE status IN ('accepted', 'classified')"
    )


def downgrade() -> None:
    op.execute("DROP INDEX message_inbox_open_idx")
    op.execute("ALTER TABLE message_inbox DROP COLUMN updated_at")
    op.execute("ALTER TABLE message_inbox DROP COLUMN error")
    op.execute("ALTER TABLE message_inbox DROP COLUMN attempts")
