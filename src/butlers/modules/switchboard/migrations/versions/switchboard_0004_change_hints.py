"""Change hints for inbox messages (accepted, classified, done); trace lookups.

Revision ID: switchboard_0004
Revises: switchboard_0003
"""

from alembic import op

revision = "switchboard_0004"
down_revision = "switchboard_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION notify_message_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('butlers_changes', json_build_object(
                'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
                'op', lower(TG_OP), 'id', NEW.request_id)::text);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER message_inbox_notify AFTER INSERT OR UPDATE OF status ON message_inbox "
        "FOR EACH ROW EXECUTE FUNCTION notify_message_change()"
    )
    op.execute("CREATE INDEX message_inbox_trace_idx ON message_inbox (trace_id)")
    op.execute("CREATE INDEX message_inbox_received_idx ON message_inbox (received_at DESC)")
    op.execute("CREATE INDEX routing_log_trace_idx ON routing_log (trace_id)")
    op.execute("CREATE INDEX routing_log_created_idx ON routing_log (created_at DESC)")


def downgrade() -> None:
    op.execute("DROP INDEX routing_log_created_idx")
    op.execute("DROP INDEX routing_log_trace_idx")
    op.execute("DROP INDEX message_inbox_received_idx")
    op.execute("DROP INDEX message_inbox_trace_idx")
    op.execute("DROP TRIGGER message_inbox_notify ON message_inbox")
    op.execute("DROP FUNCTION notify_message_change()")
