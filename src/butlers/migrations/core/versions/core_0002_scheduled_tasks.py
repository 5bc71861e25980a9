"""scheduled_tasks: cron schedules from the spec and from tools.

Revision ID: core_0002
Revises: core_0001
"""

from alembic import op

revision = "core_0002"
down_revision = "core_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE scheduled_tasks (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            name TEXT NOT NULL UNIQUE,
            cron TEXT NOT NULL,
            prompt TEXT,
            job_name TEXT,
            job_args JSONB NOT NULL DEFAULT '{}'::jsonb,
            source TEXT NOT NULL DEFAULT 'runtime' CHECK (source IN ('spec', 'runtime')),
            enabled BOOLEAN NOT NULL DEFAULT TRUE,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'completed', 'error')),
            next_due_at TIMESTAMPTZ,
            last_run_at TIMESTAMPTZ,
            last_session_id UUID,
            last_error TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            CHECK ((prompt IS NULL) <> (job_name IS NULL))
        )
        """
    )
    op.execute(
        "CREATE INDEX scheduled_tasks_due_idx ON scheduled_tasks (next_due_at) WHERE enabled"
    )


def downgrade() -> None:
    op.execute("DROP TABLE scheduled_tasks")
