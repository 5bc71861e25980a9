"""Change hints for approval requests and decisions; lookup by session.

Revision ID: approvals_0002
Revises: approvals_0001
"""

from alembic import op

revision = "approvals_0002"
down_revision = "approvals_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION notify_approval_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('butlers_changes', json_build_object(
                'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
                'op', lower(TG_OP), 'id', NEW.id)::text);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER approvals_notify AFTER INSERT OR UPDATE OF status ON approvals "
        "FOR EACH ROW EXECUTE FUNCTION notify_approval_change()"
    )
    op.execute("CREATE INDEX approvals_session_idx ON approvals (session_id)")


def downgrade() -> None:
    op.execute("DROP INDEX approvals_session_idx")
    op.execute("DROP TRIGGER approvals_notify ON approvals")
    op.execute("DROP FUNCTION notify_approval_change()")
