"""state: the JSONB key-value store.

Revision ID: core_0001
Revises:
"""

from alembic import op

revision = "core_0001"
down_revision = None
branch_labels = ("core",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE state (
            key TEXT PRIMARY KEY,
            value JSONB NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    # Literal prefix scans (key >= p AND key < p || U+10FFFF) use this index.
    op.execute("CREATE INDEX state_key_prefix_idx ON state (key text_pattern_ops)")


def downgrade() -> None:
    op.execute("DROP TABLE state")
