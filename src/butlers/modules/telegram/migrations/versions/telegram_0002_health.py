"""telegram: the connector's health beside its cursor: the last poll that worked, how
many polls failed, and how many received updates still wait to be handed over.

Revision ID: telegram_0002
Revises: telegram_0001
"""

from alembic import op

revision = "telegram_0002"
down_revision = "telegram_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE telegram_cursor ADD COLUMN last_ok_at TIMESTAMPTZ, "
        "ADD COLUMN errors BIGINT NOT NULL DEFAULT 0, "
        "ADD COLUMN backlog INTEGER NOT NULL DEFAULT 0, "
        "ADD COLUMN mode TEXT NOT NULL DEFAULT 'poll'"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE telegram_cursor DROP COLUMN mode, DROP COLUMN backlog, "
        "DROP COLUMN errors, DROP COLUMN last_ok_at"
    )
