"""The owner's runtime module overrides: modules of `spec.modules` switched off.

One row per module the owner disabled while the butler runs (dashboard: the butler's
modules); enabling it again deletes the row, so the spec decides once more. The
loader reads the table at start, so an override outlives restarts.

Revision ID: core_0010
Revises: core_0009
"""

from alembic import op

revision = "core_0010"
down_revision = "core_0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE disabled_modules (
            module TEXT PRIMARY KEY,
            disabled_by TEXT NOT NULL,
            disabled_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE disabled_modules")
