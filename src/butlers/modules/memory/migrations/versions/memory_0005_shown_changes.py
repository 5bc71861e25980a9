"""a row's change number also moves when what a search result shows changes.

The butler's vector index now holds what a result shows (a fact's subject, predicate
and content, a rule's content, the provenance, the butler that shared a fact), so a
search reads no rows after ranking; a change to any of them makes the next search
read the row again. Marking a fact used or decaying it still does not.

No statistics are gathered for the embedding columns: no query filters or sorts by
them in SQL, and an ANALYZE spent almost all its time on them (at 100,000 facts, 14 of
15 s of CPU; autovacuum runs one after every large batch of writes, and a search on a
2-core machine waits while it runs).

The full-text indexes take each write at once (`fastupdate` off): with it on, new rows'
words wait in the index's pending list (up to 4 MB, about 19,000 facts' words) until
the next vacuum, and every search reads that whole list (measured after 90,000 facts
were added: 18,846 pending entries, full-text queries 6-24 ms instead of 1-2 ms). Facts
and rules are written one at a time, so the list saved little.

Revision ID: memory_0005
Revises: memory_0004
"""

from alembic import op

revision = "memory_0005"
down_revision = "memory_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("memory_facts", "memory_rules"):
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STATISTICS 0")
        op.execute(f"ALTER INDEX {table}_search_idx SET (fastupdate = off)")
    # PL/pgSQL plans each statement per table the trigger fires on, so the facts-only
    # columns are read only on memory_facts.
    op.execute(
        """
        CREATE OR REPLACE FUNCTION memory_touch() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.embedding IS DISTINCT FROM OLD.embedding
                OR NEW.validity IS DISTINCT FROM OLD.validity
                OR NEW.content IS DISTINCT FROM OLD.content
                OR NEW.provenance IS DISTINCT FROM OLD.provenance THEN
                NEW.change_seq := nextval('memory_change_seq');
            ELSIF TG_TABLE_NAME = 'memory_facts' THEN
                IF NEW.subject IS DISTINCT FROM OLD.subject
                    OR NEW.predicate IS DISTINCT FROM OLD.predicate
                    OR NEW.shared_from IS DISTINCT FROM OLD.shared_from THEN
                    NEW.change_seq := nextval('memory_change_seq');
                END IF;
            END IF;
            NEW.updated_at := clock_timestamp();
            RETURN NEW;
        END $$
        """
    )


def downgrade() -> None:
    for table in ("memory_facts", "memory_rules"):
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STATISTICS -1")
        op.execute(f"ALTER INDEX {table}_search_idx RESET (fastupdate)")
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
