"""reminders and reminder_deliveries.

`reminders`: one row per reminder (one-shot, or recurring by an RFC 5545 rule in
the owner's time zone); `next_due_at` is the occurrence due next, `attempt_at` when
the next delivery attempt may run (later than `next_due_at` only while retrying),
`claimed_until` a lease so that two loops never send the same occurrence.
`reminder_deliveries`: one row per delivery attempt, with the messenger's delivery
id, its outcome, and whether it was late.

Revision ID: reminders_0001
Revises:
"""

from alembic import op

revision = "reminders_0001"
down_revision = None
branch_labels = ("reminders",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE reminders (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            text TEXT NOT NULL CHECK (char_length(text) BETWEEN 1 AND 2000),
            channel TEXT,
            rrule TEXT,
            time_zone TEXT NOT NULL DEFAULT 'UTC',
            first_due_at TIMESTAMPTZ NOT NULL,
            next_due_at TIMESTAMPTZ,
            attempt_at TIMESTAMPTZ,
            claimed_until TIMESTAMPTZ,
            attempts INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
            last_error TEXT,
            delivered_count INTEGER NOT NULL DEFAULT 0,
            last_delivered_at TIMESTAMPTZ,
            created_by TEXT NOT NULL,
            session_id TEXT,
            cancelled_by TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        "CREATE INDEX reminders_attempt_idx ON reminders (attempt_at) WHERE status = 'pending'"
    )
    op.execute("CREATE INDEX reminders_created_idx ON reminders (created_at DESC, id DESC)")
    op.execute(
        """
        CREATE TABLE reminder_deliveries (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            reminder_id UUID NOT NULL REFERENCES reminders (id) ON DELETE CASCADE,
            due_at TIMESTAMPTZ NOT NULL,
            attempt INTEGER NOT NULL CHECK (attempt >= 1),
            attempted_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            late BOOLEAN NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('sent', 'failed')),
            error TEXT,
            delivery_id TEXT,
            UNIQUE (reminder_id, due_at, attempt)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE reminder_deliveries")
    op.execute("DROP TABLE reminders")
