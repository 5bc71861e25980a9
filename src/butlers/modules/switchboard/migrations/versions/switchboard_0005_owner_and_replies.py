"""switchboard: strangers' messages held in quarantine, and the reply to each message.

`quarantined` messages (from anyone but the channel's owner) wait with their reason
until the owner releases (→ `accepted`) or drops (→ `dropped`) them. `reply_state`
follows the answer (`reply_text`) sent back on the message's thread: `pending` until the messenger
recorded a delivery, then `sent` or `failed` (`reply_error`), with the delivery's id.

Revision ID: switchboard_0005
Revises: switchboard_0004
"""

from alembic import op

revision = "switchboard_0005"
down_revision = "switchboard_0004"
branch_labels = None
depends_on = None

STATUSES = "'accepted', 'classified', 'dispatched', 'partial', 'failed'"


def upgrade() -> None:
    op.execute("ALTER TABLE message_inbox DROP CONSTRAINT message_inbox_status_check")
    op.execute(
        "ALTER TABLE message_inbox ADD CONSTRAINT message_inbox_status_check "
        f"CHECK (status IN ({STATUSES}, 'quarantined', 'dropped'))"
    )
    op.execute("ALTER TABLE message_inbox ADD COLUMN quarantine_reason TEXT")
    op.execute(
        "ALTER TABLE message_inbox ADD COLUMN reply_state TEXT "
        "CHECK (reply_state IN ('pending', 'sent', 'failed'))"
    )
    op.execute("ALTER TABLE message_inbox ADD COLUMN reply_text TEXT")
    op.execute("ALTER TABLE message_inbox ADD COLUMN reply_error TEXT")
    op.execute("ALTER TABLE message_inbox ADD COLUMN reply_delivery_id UUID")
    op.execute("ALTER TABLE message_inbox ADD COLUMN reply_attempts INTEGER NOT NULL DEFAULT 0")
    op.execute(
        "CREATE INDEX message_inbox_quarantined_idx ON message_inbox (received_at) "
        "WHERE status = 'quarantined'"
    )
    op.execute(
        "CREATE INDEX message_inbox_reply_pending_idx ON message_inbox (received_at) "
        "WHERE reply_state = 'pending'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX message_inbox_reply_pending_idx")
    op.execute("DROP INDEX message_inbox_quarantined_idx")
    for column in (
        "reply_attempts",
        "reply_delivery_id",
        "reply_error",
        "reply_text",
        "reply_state",
    ):
        op.execute(f"ALTER TABLE message_inbox DROP COLUMN {column}")
    op.execute("ALTER TABLE message_inbox DROP COLUMN quarantine_reason")
    op.execute("DELETE FROM message_inbox WHERE status IN ('quarantined', 'dropped')")
    op.execute("ALTER TABLE message_inbox DROP CONSTRAINT message_inbox_status_check")
    op.execute(
        f"ALTER TABLE message_inbox ADD CONSTRAINT message_inbox_status_check "
        f"CHECK (status IN ({STATUSES}))"
    )
