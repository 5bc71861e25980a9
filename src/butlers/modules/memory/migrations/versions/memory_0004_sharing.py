"""facts shared by another butler, and who started each consolidation run.

A fact the owner shares with this butler is a copy here, marked with the butler it
came from and its id there (`shared_from`, `shared_id`): one copy per origin fact. A
copy takes no part in supersession (this butler's own fact on the same subject and
predicate stays active beside it). A consolidation run records whether the schedule
or the owner started it.

Revision ID: memory_0004
Revises: memory_0003
"""

from alembic import op

revision = "memory_0004"
down_revision = "memory_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memory_facts ADD COLUMN shared_from TEXT "
        "CHECK (shared_from ~ '^[a-z][a-z0-9-]{0,62}$'), ADD COLUMN shared_id UUID, "
        "ADD CONSTRAINT memory_facts_shared_check "
        "CHECK ((shared_from IS NULL) = (shared_id IS NULL))"
    )
    op.execute("DROP INDEX memory_facts_current_idx")
    op.execute(
        "CREATE UNIQUE INDEX memory_facts_current_idx ON memory_facts (subject, predicate) "
        "WHERE validity = 'active' AND shared_from IS NULL"
    )
    op.execute(
        "CREATE UNIQUE INDEX memory_facts_shared_idx ON memory_facts (shared_from, shared_id) "
        "WHERE shared_from IS NOT NULL"
    )
    op.execute(
        "ALTER TABLE memory_consolidation_runs ADD COLUMN trigger TEXT NOT NULL "
        "DEFAULT 'schedule' CHECK (trigger IN ('schedule', 'owner'))"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE memory_consolidation_runs DROP COLUMN trigger")
    op.execute("DELETE FROM memory_facts WHERE shared_from IS NOT NULL")
    op.execute("DROP INDEX memory_facts_shared_idx, memory_facts_current_idx")
    op.execute(
        "CREATE UNIQUE INDEX memory_facts_current_idx ON memory_facts (subject, predicate) "
        "WHERE validity = 'active'"
    )
    op.execute(
        "ALTER TABLE memory_facts DROP CONSTRAINT memory_facts_shared_check, "
        "DROP COLUMN shared_from, DROP COLUMN shared_id"
    )
