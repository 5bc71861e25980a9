"""collections and the notes filed in them.

Revision ID: general_0001
Revises:
"""

from alembic import op

revision = "general_0001"
down_revision = None
branch_labels = ("general",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE collections (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            name TEXT NOT NULL UNIQUE,
            description TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE notes (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            collection_id UUID NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            title TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '',
            data JSONB NOT NULL DEFAULT '{}'::jsonb,
            tags TEXT[] NOT NULL DEFAULT '{}',
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX notes_collection_idx ON notes (collection_id, created_at DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE notes, collections")
