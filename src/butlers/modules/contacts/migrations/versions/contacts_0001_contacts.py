"""contacts, notes about them and interactions with them.

Revision ID: contacts_0001
Revises:
"""

from alembic import op

revision = "contacts_0001"
down_revision = None
branch_labels = ("contacts",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE contacts (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            name TEXT NOT NULL,
            email TEXT,
            phone TEXT,
            birthday DATE,
            details JSONB NOT NULL DEFAULT '{}'::jsonb,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX contacts_name_idx ON contacts (lower(name))")
    op.execute(
        """
        CREATE TABLE contact_notes (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            contact_id UUID NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
            body TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE interactions (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            contact_id UUID NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            summary TEXT,
            occurred_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE interactions, contact_notes, contacts")
