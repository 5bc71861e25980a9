"""secrets: the butler's own secrets store (values sealed with the secrets key).

A row without a value is a declared but unset secret. `key_id` names the key that
sealed the value (a digest, never the key), for rotation.

Revision ID: core_0008
Revises: core_0006
"""

from alembic import op

revision = "core_0008"
down_revision = "core_0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE secrets (
            key TEXT PRIMARY KEY CHECK (key ~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$'),
            category TEXT NOT NULL DEFAULT 'general'
                CHECK (length(category) BETWEEN 1 AND 64),
            description TEXT NOT NULL DEFAULT '' CHECK (length(description) <= 1000),
            is_sensitive BOOLEAN NOT NULL DEFAULT TRUE,
            value BYTEA,
            key_id TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_by TEXT,
            CHECK ((value IS NULL) = (key_id IS NULL))
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE secrets")
