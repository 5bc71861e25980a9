"""switchboard: a change of a message's reply state is a change hint too (the
Conversations page shows the reply's delivery as it happens).

Revision ID: switchboard_0007
Revises: switchboard_0006
"""

from alembic import op

revision = "switchboard_0007"
down_revision = "switchboard_0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP TRIGGER message_inbox_notify ON message_inbox")
    op.execute(
        "CREATE TRIGGER message_inbox_notify AFTER INSERT OR UPDATE OF status, reply_state "
        "ON message_inbox FOR EACH ROW EXECUTE FUNCTION notify_message_change()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER message_inbox_notify ON message_inbox")
    op.execute(
        "CREATE TRIGGER message_inbox_notify AFTER INSERT OR UPDATE OF status ON message_inbox "
        "FOR EACH ROW EXECUTE FUNCTION notify_message_change()"
    )
