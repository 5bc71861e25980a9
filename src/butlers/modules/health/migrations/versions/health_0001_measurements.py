"""measurements, medications, medication doses and symptoms.

Revision ID: health_0001
Revises:
"""

from alembic import op

revision = "health_0001"
down_revision = None
branch_labels = ("health",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE measurements (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            type TEXT NOT NULL,
            value JSONB NOT NULL,
            unit TEXT,
            measured_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            notes TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX measurements_type_time_idx ON measurements (type, measured_at DESC)")
    op.execute(
        """
        CREATE TABLE medications (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            name TEXT NOT NULL UNIQUE,
            dosage TEXT,
            frequency TEXT,
            notes TEXT,
            active BOOLEAN NOT NULL DEFAULT TRUE,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE medication_doses (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            medication_id UUID NOT NULL REFERENCES medications (id) ON DELETE CASCADE,
            taken_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            notes TEXT
        )
        """
    )
    op.execute(
        """
        CREATE TABLE symptoms (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            name TEXT NOT NULL,
            severity INTEGER CHECK (severity BETWEEN 1 AND 10),
            occurred_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            notes TEXT
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE symptoms, medication_doses, medications, measurements")
