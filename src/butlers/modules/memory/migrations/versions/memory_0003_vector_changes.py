"""a row's change number moves only when what the vector index holds changes.

The butler's vector index re-reads the rows whose `change_seq` moved; marking a fact
used (every recall does) or decaying it changes neither its embedding nor whether it
is searchable, so it no longer makes the next search read the row again.

Revision ID: memory_0003
Revises: memory_0002
"""

from alembic import op

revision = "memory_0003"
down_revision = "memory_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION memory_touch() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.embedding IS DISTINCT FROM OLD.embedding
                OR NEW.validity IS DISTINCT FROM OLD.validity THEN
                NEW.change_seq := nextval('memory_change_seq');
            END IF;
            NEW.updated_at := clock_timestamp();
            RETURN NEW;
        END $$
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION memory_touch() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.change_seq := nextval('memory_change_seq');
            NEW.updated_at := clock_timestamp();
            RETURN NEW;
        END $$
        """
    )
