"""sessions: idempotency keys (a keyed trigger runs at most once) and `interrupted`.

A session left `running` by a process that died is marked `interrupted` when the
butler starts again. A trigger carrying an idempotency key is recorded with the key
and a hash of its request, so a repeated call returns the first session instead of
running a second one.

Revision ID: core_0004
Revises: core_0003
"""

from alembic import op

revision = "core_0004"
down_revision = "core_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_status_check")
    op.execute(
        "ALTER TABLE sessions ADD CONSTRAINT sessions_status_check "
        "CHECK (status IN ('running', 'completed', 'error', 'interrupted'))"
    )
    op.execute("ALTER TABLE sessions ADD COLUMN idempotency_key TEXT")
    op.execute("ALTER TABLE sessions ADD COLUMN request_hash TEXT")
    op.execute(
        "CREATE UNIQUE INDEX sessions_idempotency_key_idx ON sessions (idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )
    op.execute("CREATE INDEX sessions_running_idx ON sessions (status) WHERE status = 'running'")


def downgrade() -> None:
    op.execute("DROP INDEX sessions_running_idx")
    op.execute("DROP INDEX sessions_idempotency_key_idx")
    op.execute("ALTER TABLE sessions DROP COLUMN request_hash")
    op.execute("ALTER TABLE sessions DROP COLUMN idempotency_key")
    op.execute("UPDATE sessions SET status = 'error' WHERE status = 'interrupted'")
    op.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_status_check")
    op.execute(
        "ALTER TABLE sessions ADD CONSTRAINT sessions_status_check "
        "CHECK (status IN ('running', 'completed', 'error'))"
    )
