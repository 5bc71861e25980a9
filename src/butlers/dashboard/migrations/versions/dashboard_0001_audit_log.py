"""audit_log: every write the dashboard made through a butler's MCP tools.

Revision ID: dashboard_0001
Revises:
"""

from alembic import op

revision = "dashboard_0001"
down_revision = None
branch_labels = ("dashboard",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE audit_log (
            id BIGSERIAL PRIMARY KEY,
            at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            actor TEXT NOT NULL,
            butler TEXT,
            operation TEXT NOT NULL,
            target TEXT,
            request JSONB NOT NULL DEFAULT '{}'::jsonb,
            status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
            error TEXT,
            duration_ms INTEGER CHECK (duration_ms >= 0),
            client TEXT
        )
        """
    )
    op.execute("CREATE INDEX audit_log_at_idx ON audit_log (at DESC, id DESC)")
    op.execute("CREATE INDEX audit_log_butler_idx ON audit_log (butler, at DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE audit_log")
