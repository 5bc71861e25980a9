"""The inbound connector's cursor per mailbox folder, and the messages it could not hand off.

Revision ID: email_0001
Revises:
"""

from alembic import op

revision = "email_0001"
down_revision = None
branch_labels = ("email",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE email_inbound (
            mailbox TEXT NOT NULL,
            folder TEXT NOT NULL,
            uidvalidity BIGINT NOT NULL,
            last_uid BIGINT NOT NULL,
            idle BOOLEAN,
            backlog INTEGER NOT NULL DEFAULT 0,
            accepted BIGINT NOT NULL DEFAULT 0,
            errors BIGINT NOT NULL DEFAULT 0,
            last_error TEXT,
            last_error_at TIMESTAMPTZ,
            last_poll_at TIMESTAMPTZ,
            last_accepted_at TIMESTAMPTZ,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (mailbox, folder)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE email_inbound_refused (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            mailbox TEXT NOT NULL,
            folder TEXT NOT NULL,
            uidvalidity BIGINT NOT NULL,
            uid BIGINT NOT NULL,
            message_id TEXT,
            sender TEXT,
            subject TEXT,
            error TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE email_inbound_refused")
    op.execute("DROP TABLE email_inbound")
