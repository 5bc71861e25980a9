"""calendar: a version of the local copy, bumped by every change to what a listing shows.

The `calendar_list_events` tool keeps recent listings in memory and serves one again
while the version it was read at is current: one small read instead of the listing's
query. Triggers bump it, so any process writing the copy (a second pod during a rollout
too) invalidates every other's listings.

Revision ID: calendar_0002
Revises: calendar_0001
"""

from alembic import op

revision = "calendar_0002"
down_revision = "calendar_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE calendar_copy_version (
            id BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
            version BIGINT NOT NULL DEFAULT 0
        )
        """
    )
    op.execute("INSERT INTO calendar_copy_version DEFAULT VALUES")
    op.execute(
        """
        CREATE FUNCTION calendar_copy_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE calendar_copy_version SET version = version + 1;
            RETURN NULL;
        END
        $$
        """
    )
    for table in ("calendar_events", "calendar_event_instances"):
        op.execute(
            f"CREATE TRIGGER {table}_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION calendar_copy_changed()"
        )
    # A calendar's cursor moves at every sync; only what a listing shows counts.
    op.execute(
        "CREATE TRIGGER calendar_sources_version AFTER UPDATE ON calendar_sources "
        "FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name "
        "OR OLD.writable IS DISTINCT FROM NEW.writable) "
        "EXECUTE FUNCTION calendar_copy_changed()"
    )
    # Per row: a discovery's upsert that finds the calendar is no insertion.
    op.execute(
        "CREATE TRIGGER calendar_sources_rows_version AFTER INSERT OR DELETE "
        "ON calendar_sources FOR EACH ROW EXECUTE FUNCTION calendar_copy_changed()"
    )


def downgrade() -> None:
    for table in ("calendar_events", "calendar_event_instances"):
        op.execute(f"DROP TRIGGER {table}_version ON {table}")
    op.execute("DROP TRIGGER calendar_sources_version ON calendar_sources")
    op.execute("DROP TRIGGER calendar_sources_rows_version ON calendar_sources")
    op.execute("DROP FUNCTION calendar_copy_changed()")
    op.execute("DROP TABLE calendar_copy_version")
