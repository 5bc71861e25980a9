"""consolidation runs, decay bookkeeping, episodes' trigger and outcome.

Revision ID: memory_0002
Revises: memory_0001
"""

from alembic import op

revision = "memory_0002"
down_revision = "memory_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Decay counts from the later of a fact's last use and its last decay.
    op.execute("ALTER TABLE memory_facts ADD COLUMN decayed_at TIMESTAMPTZ")
    op.execute(
        "ALTER TABLE memory_episodes ADD COLUMN trigger_source TEXT NOT NULL DEFAULT '', "
        "ADD COLUMN success BOOLEAN NOT NULL DEFAULT TRUE"
    )
    op.execute(
        "CREATE INDEX memory_episodes_open_idx ON memory_episodes (created_at) "
        "WHERE NOT consolidated"
    )
    op.execute("CREATE INDEX memory_episodes_created_idx ON memory_episodes (created_at)")
    op.execute("CREATE INDEX memory_facts_created_idx ON memory_facts (created_at)")
    op.execute("CREATE INDEX memory_rules_created_idx ON memory_rules (created_at)")
    op.execute(
        """
        CREATE TABLE memory_consolidation_runs (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            finished_at TIMESTAMPTZ,
            status TEXT NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'completed', 'failed')),
            episodes INTEGER NOT NULL DEFAULT 0,
            created INTEGER NOT NULL DEFAULT 0,
            reinforced INTEGER NOT NULL DEFAULT 0,
            superseded INTEGER NOT NULL DEFAULT 0,
            decayed INTEGER NOT NULL DEFAULT 0,
            faded INTEGER NOT NULL DEFAULT 0,
            expired INTEGER NOT NULL DEFAULT 0,
            session_id UUID,
            error TEXT
        )
        """
    )
    op.execute(
        "CREATE INDEX memory_consolidation_runs_started_idx "
        "ON memory_consolidation_runs (started_at)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE memory_consolidation_runs")
    op.execute("DROP INDEX memory_episodes_open_idx, memory_episodes_created_idx")
    op.execute("DROP INDEX memory_facts_created_idx, memory_rules_created_idx")
    op.execute("ALTER TABLE memory_episodes DROP COLUMN trigger_source, DROP COLUMN success")
    op.execute("ALTER TABLE memory_facts DROP COLUMN decayed_at")
