"""sessions: one row per LLM session, written before and completed after.

Revision ID: core_0003
Revises: core_0002
"""

from alembic import op

revision = "core_0003"
down_revision = "core_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE sessions (
            session_id UUID PRIMARY KEY,
            butler_name TEXT NOT NULL,
            trigger_source TEXT NOT NULL,
            prompt TEXT NOT NULL,
            model TEXT,
            status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'error')),
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            completed_at TIMESTAMPTZ,
            duration_ms INTEGER CHECK (duration_ms >= 0),
            tool_calls JSONB NOT NULL DEFAULT '[]'::jsonb,
            output TEXT,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cost_usd NUMERIC(12, 6),
            trace_id TEXT,
            error TEXT,
            context JSONB
        )
        """
    )
    op.execute("CREATE INDEX sessions_created_at_idx ON sessions (created_at DESC)")
    op.execute("CREATE INDEX sessions_trigger_source_idx ON sessions (trigger_source)")


def downgrade() -> None:
    op.execute("DROP TABLE sessions")
