"""deliveries: every outbound notification attempt and its outcome.

Revision ID: messenger_0001
Revises:
"""

from alembic import op

revision = "messenger_0001"
down_revision = None
branch_labels = ("messenger",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE deliveries (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            channel TEXT NOT NULL,
            recipient TEXT,
            subject TEXT,
            body TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('sent', 'failed')),
            error TEXT,
            provider_message_id TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX deliveries_created_idx ON deliveries (created_at DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE deliveries")
