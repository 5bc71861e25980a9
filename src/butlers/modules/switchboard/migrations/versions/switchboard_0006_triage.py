"""triage rules, thread affinity and its settings; `ignored` messages.

Revision ID: switchboard_0006
Revises: switchboard_0005
"""

from alembic import op

revision = "switchboard_0006"
down_revision = "switchboard_0005"
branch_labels = None
depends_on = None

IGNORED = "'ignored'::text, "


def _statuses(edit: str) -> str:
    """Rewrite the inbox's status check whatever statuses other migrations gave it
    (`edit`: an SQL expression over `def`, the constraint's current definition)."""
    return f"""
        DO $$
        DECLARE def text;
        BEGIN
            SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
            WHERE conrelid = 'message_inbox'::regclass
              AND conname = 'message_inbox_status_check';
            EXECUTE 'ALTER TABLE message_inbox DROP CONSTRAINT message_inbox_status_check';
            EXECUTE 'ALTER TABLE message_inbox ADD CONSTRAINT message_inbox_status_check '
                || {edit};
        END $$
        """


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE triage_rules (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            name TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
            priority INTEGER NOT NULL DEFAULT 100 CHECK (priority BETWEEN 0 AND 100000),
            enabled BOOLEAN NOT NULL DEFAULT true,
            channel TEXT NOT NULL DEFAULT 'email'
                CHECK (channel IN ('email', 'telegram', 'any')),
            match JSONB NOT NULL CHECK (jsonb_typeof(match) = 'object'),
            action TEXT NOT NULL CHECK (action IN ('ignore', 'route', 'classify')),
            butler TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            CHECK ((action = 'route') = (butler IS NOT NULL))
        )
        """
    )
    op.execute(
        """
        CREATE TABLE thread_affinity (
            channel TEXT NOT NULL,
            thread_id TEXT NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 256),
            butler TEXT NOT NULL,
            pinned BOOLEAN NOT NULL DEFAULT false,
            request_id UUID,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (channel, thread_id)
        )
        """
    )
    op.execute("CREATE INDEX thread_affinity_updated_idx ON thread_affinity (updated_at)")
    op.execute(
        """
        CREATE TABLE triage_settings (
            id BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
            affinity_enabled BOOLEAN NOT NULL DEFAULT true,
            affinity_ttl_days INTEGER NOT NULL DEFAULT 30
                CHECK (affinity_ttl_days BETWEEN 1 AND 3650),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("INSERT INTO triage_settings DEFAULT VALUES")
    op.execute(_statuses(f"replace(def, 'ARRAY[', {_quoted('ARRAY[' + IGNORED)})"))


def downgrade() -> None:
    op.execute("UPDATE message_inbox SET status = 'dispatched' WHERE status = 'ignored'")
    op.execute(_statuses(f"replace(def, {_quoted(IGNORED)}, '')"))
    op.execute("DROP TABLE triage_settings")
    op.execute("DROP TABLE thread_affinity")
    op.execute("DROP TABLE triage_rules")
