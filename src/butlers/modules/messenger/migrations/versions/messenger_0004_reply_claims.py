"""deliveries: a reply is claimed before it is sent (`sending`), so two attempts at the
same message never both send, and an attempt cut off by a crash is known.

`claimed_by` is the butler start (`butler_starts.number`) whose process is sending,
`claimed_at` when; `interrupted` counts the attempts a dead process left `sending`
(the reply was then sent again: the owner may have received it twice).

Revision ID: messenger_0004
Revises: messenger_0003
"""

from alembic import op

revision = "messenger_0004"
down_revision = "messenger_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check")
    op.execute(
        "ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check "
        "CHECK (status IN ('sending', 'sent', 'failed', 'held', 'refused'))"
    )
    op.execute("ALTER TABLE deliveries ADD COLUMN claimed_by INTEGER")
    op.execute("ALTER TABLE deliveries ADD COLUMN claimed_at TIMESTAMPTZ")
    op.execute("ALTER TABLE deliveries ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0")


def downgrade() -> None:
    # A reply still `sending` was cut off: keep it as a failed attempt (retried by the
    # switchboard), never drop it.
    op.execute(
        "UPDATE deliveries SET status = 'failed', "
        "error = 'interrupted while sending (claim dropped by a downgrade)' "
        "WHERE status = 'sending'"
    )
    for column in ("interrupted", "claimed_at", "claimed_by"):
        op.execute(f"ALTER TABLE deliveries DROP COLUMN {column}")
    op.execute("ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check")
    op.execute(
        "ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check "
        "CHECK (status IN ('sent', 'failed', 'held', 'refused'))"
    )
