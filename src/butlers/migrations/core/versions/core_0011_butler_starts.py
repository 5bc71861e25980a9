"""Each start of the butler's process, numbered, and whether it stopped cleanly.

A start whose predecessor has no `stopped_at` followed a crash or a kill. `number`
counts every start ever made (rows beyond the kept history are pruned, the count
is not).

Revision ID: core_0011
Revises: core_0010
"""

from alembic import op

revision = "core_0011"
down_revision = "core_0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE butler_starts (
            number BIGINT PRIMARY KEY,
            started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            stopped_at TIMESTAMPTZ,
            pid INTEGER,
            version TEXT
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE butler_starts")
