"""Per-LLM-call records and the `cancelled` session status.

`llm_calls` holds one row per model call of a session (model, tokens in, out and
cached, timing, the request's new messages and the response, both redacted and
bounded), written with the session's completion. `sessions.llm_call_count` counts
them, so listings need no join. A session stopped by the user ends `cancelled`.

Revision ID: core_0006
Revises: core_0005
"""

from alembic import op

revision = "core_0006"
down_revision = "core_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_status_check")
    op.execute(
        "ALTER TABLE sessions ADD CONSTRAINT sessions_status_check CHECK "
        "(status IN ('running', 'completed', 'error', 'interrupted', 'cancelled'))"
    )
    op.execute("ALTER TABLE sessions ADD COLUMN llm_call_count INTEGER")
    op.execute(
        """
        CREATE TABLE llm_calls (
            session_id UUID NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL CHECK (seq >= 0),
            model TEXT,
            started_at TIMESTAMPTZ NOT NULL,
            duration_ms DOUBLE PRECISION NOT NULL CHECK (duration_ms >= 0),
            input_tokens INTEGER,
            output_tokens INTEGER,
            cached_tokens INTEGER,
            request JSONB NOT NULL,
            response JSONB,
            error TEXT,
            PRIMARY KEY (session_id, seq)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE llm_calls")
    op.execute("ALTER TABLE sessions DROP COLUMN llm_call_count")
    op.execute("UPDATE sessions SET status = 'error' WHERE status = 'cancelled'")
    op.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_status_check")
    op.execute(
        "ALTER TABLE sessions ADD CONSTRAINT sessions_status_check "
        "CHECK (status IN ('running', 'completed', 'error', 'interrupted'))"
    )
