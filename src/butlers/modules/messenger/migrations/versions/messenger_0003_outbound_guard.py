"""Outbound guard: held and refused deliveries, who sent them, and allowed contacts.

Revision ID: messenger_0003
Revises: messenger_0002
"""

from alembic import op

revision = "messenger_0003"
down_revision = "messenger_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_status_check")
    op.execute(
        "ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check "
        "CHECK (status IN ('sent', 'failed', 'held', 'refused'))"
    )
    op.execute("ALTER TABLE deliveries ADD COLUMN tool TEXT")
    op.execute("ALTER TABLE deliveries ADD COLUMN approval_id UUID")
    op.execute("ALTER TABLE deliveries ADD COLUMN updated_at TIMESTAMPTZ")
    op.execute(
        """
        CREATE TABLE allowed_contacts (
            channel TEXT NOT NULL CHECK (channel IN ('telegram', 'email')),
            address TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 320),
            name TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (channel, address)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE allowed_contacts")
    op.execute("DELETE FROM deliveries WHERE status IN ('held', 'refused')")
    op.execute("ALTER TABLE deliveries DROP COLUMN updated_at")
    op.execute("ALTER TABLE deliveries DROP COLUMN approval_id")
    op.execute("ALTER TABLE deliveries DROP COLUMN tool")
    op.execute("ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check")
    op.execute(
        "ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check "
        "CHECK (status IN ('sent', 'failed'))"
    )
