"""Change hints for the dashboard, per-tool-call timing and lookup indexes.

Sessions and scheduled tasks publish `pg_notify('butlers_changes', ...)` hints
(schema, table, operation and the row's id only; readers re-read the row) from
triggers, so every write path publishes in the same transaction as the write.
Sessions get the indexes the dashboard reads by: `trace_id` and a keyset order.

Revision ID: core_0005
Revises: core_0004
"""

from alembic import op

revision = "core_0005"
down_revision = "core_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION notify_session_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('butlers_changes', json_build_object(
                'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
                'op', lower(TG_OP), 'id', NEW.session_id)::text);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OF status ON sessions "
        "FOR EACH ROW EXECUTE FUNCTION notify_session_change()"
    )
    op.execute(
        """
        CREATE FUNCTION notify_schedule_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('butlers_changes', json_build_object(
                'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME, 'op', lower(TG_OP),
                'id', CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END)::text);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER scheduled_tasks_notify AFTER INSERT OR UPDATE OR DELETE "
        "ON scheduled_tasks FOR EACH ROW EXECUTE FUNCTION notify_schedule_change()"
    )
    op.execute("CREATE INDEX sessions_trace_id_idx ON sessions (trace_id)")
    # Keyset pages: (created_at, session_id) descending, the dashboard's order.
    op.execute("DROP INDEX sessions_created_at_idx")
    op.execute(
        "CREATE INDEX sessions_created_at_idx ON sessions (created_at DESC, session_id DESC)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX sessions_created_at_idx")
    op.execute("CREATE INDEX sessions_created_at_idx ON sessions (created_at DESC)")
    op.execute("DROP INDEX sessions_trace_id_idx")
    op.execute("DROP TRIGGER scheduled_tasks_notify ON scheduled_tasks")
    op.execute("DROP FUNCTION notify_schedule_change()")
    op.execute("DROP TRIGGER sessions_notify ON sessions")
    op.execute("DROP FUNCTION notify_session_change()")
