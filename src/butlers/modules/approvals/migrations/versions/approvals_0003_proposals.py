"""Proposals: approval requests no call is held for.

A `proposal` row records a change a session asks for (a recurring prompt, as the
`schedule_create` call it would be); the owner's approval runs that call then, however
much later, instead of releasing a held one. Start-up expires only held calls' rows.

Revision ID: approvals_0003
Revises: approvals_0002
"""

from alembic import op

revision = "approvals_0003"
down_revision = "approvals_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'call' "
        "CHECK (kind IN ('call', 'proposal'))"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE approvals DROP COLUMN kind")
