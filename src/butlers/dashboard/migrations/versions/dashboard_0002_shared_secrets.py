"""shared_secrets: the store every butler reads besides its own (values sealed).

The dashboard writes it; it grants each butler's role SELECT on it.

A row without a value is a declared but unset secret. `key_id` names the key that
sealed the value (a digest, never the key), for rotation.

Revision ID: dashboard_0002
Revises: dashboard_0001
"""

from alembic import op

revision = "dashboard_0002"
down_revision = "dashboard_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE shared_secrets (
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
    op.execute("DROP TABLE shared_secrets")
