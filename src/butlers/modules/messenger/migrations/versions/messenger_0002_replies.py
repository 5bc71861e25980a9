"""deliveries: replies on a message's thread, one row per message, retried in place.

`request_id` is the switchboard message a reply answers (unique: a repeat of the
same reply updates its row, never sends twice once sent); `thread` the channel's
references it was sent with; `attempts` how often it was tried.

Revision ID: messenger_0002
Revises: messenger_0001
"""

from alembic import op

revision = "messenger_0002"
down_revision = "messenger_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE deliveries ADD COLUMN request_id UUID")
    op.execute("ALTER TABLE deliveries ADD COLUMN thread JSONB")
    op.execute("ALTER TABLE deliveries ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1")
    op.execute(
        "CREATE UNIQUE INDEX deliveries_request_idx ON deliveries (request_id) "
        "WHERE request_id IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX deliveries_request_idx")
    for column in ("attempts", "thread", "request_id"):
        op.execute(f"ALTER TABLE deliveries DROP COLUMN {column}")
