"""approvals: held tool calls and their decisions (the audit trail).

Revision ID: approvals_0001
Revises:
"""

from alembic import op

revision = "approvals_0001"
down_revision = None
branch_labels = ("approvals",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE approvals (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            tool_name TEXT NOT NULL,
            tool_args JSONB NOT NULL,
            session_id TEXT,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
            requested_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            expires_at TIMESTAMPTZ NOT NULL,
            decided_at TIMESTAMPTZ,
            decided_by TEXT,
            reason TEXT
        )
        """
    )
    op.execute("CREATE INDEX approvals_status_requested_idx ON approvals (status, requested_at)")


def downgrade() -> None:
    op.execute("DROP TABLE approvals")
