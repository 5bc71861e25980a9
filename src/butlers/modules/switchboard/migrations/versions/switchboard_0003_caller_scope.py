"""switchboard: idempotency keys scoped to the caller, with the content they stand for.

`submitted_by` is the authenticated identity that sent a message (`user`, ...);
keys are unique per caller, so another caller cannot pre-empt one. `content_sha256`
is what a repeat of a key must match; a repeat with other content is a conflict.

Revision ID: switchboard_0003
Revises: switchboard_0002
"""

from alembic import op

revision = "switchboard_0003"
down_revision = "switchboard_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE message_inbox ADD COLUMN submitted_by TEXT NOT NULL DEFAULT 'user'")
    op.execute("ALTER TABLE message_inbox ALTER COLUMN submitted_by DROP DEFAULT")
    op.execute("ALTER TABLE message_inbox ADD COLUMN content_sha256 TEXT")
    op.execute("ALTER TABLE message_inbox DROP CONSTRAINT message_inbox_idempotency_key_key")
    op.execute(
        "ALTER TABLE message_inbox ADD CONSTRAINT message_inbox_caller_key_key "
        "UNIQUE (submitted_by, idempotency_key)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE message_inbox DROP CONSTRAINT message_inbox_caller_key_key")
    op.execute(
        "ALTER TABLE message_inbox ADD CONSTRAINT message_inbox_idempotency_key_key "
        "UNIQUE (idempotency_key)"
    )
    op.execute("ALTER TABLE message_inbox DROP COLUMN content_sha256")
    op.execute("ALTER TABLE message_inbox DROP COLUMN submitted_by")
