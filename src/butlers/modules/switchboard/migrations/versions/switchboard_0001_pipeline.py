"""switchboard: message inbox, butler registry, routing and fan-out logs.

Revision ID: switchboard_0001
Revises:
"""

from alembic import op

revision = "switchboard_0001"
down_revision = None
branch_labels = ("switchboard",)
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE message_inbox (
            request_id UUID PRIMARY KEY,
            idempotency_key TEXT NOT NULL UNIQUE,
            channel TEXT NOT NULL,
            provider TEXT NOT NULL,
            sender TEXT NOT NULL,
            text TEXT NOT NULL,
            envelope JSONB NOT NULL,
            status TEXT NOT NULL DEFAULT 'accepted'
                CHECK (status IN ('accepted', 'classified', 'dispatched', 'partial', 'failed')),
            classification JSONB,
            trace_id TEXT,
            received_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            completed_at TIMESTAMPTZ
        )
        """
    )
    op.execute(
        """
        CREATE TABLE butler_registry (
            name TEXT PRIMARY KEY,
            description TEXT NOT NULL,
            url TEXT NOT NULL,
            hints JSONB NOT NULL DEFAULT '[]'::jsonb,
            modules JSONB NOT NULL DEFAULT '[]'::jsonb,
            registered_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            last_seen_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE routing_log (
            route_id UUID PRIMARY KEY,
            request_id UUID REFERENCES message_inbox (request_id),
            butler TEXT NOT NULL,
            prompt TEXT NOT NULL,
            segment TEXT,
            status TEXT NOT NULL
                CHECK (status IN ('success', 'error', 'timeout', 'target_unavailable')),
            session_id UUID,
            error TEXT,
            duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
            trace_id TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX routing_log_request_idx ON routing_log (request_id)")
    op.execute(
        """
        CREATE TABLE fanout_execution_log (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            request_id UUID NOT NULL REFERENCES message_inbox (request_id),
            abort_policy TEXT NOT NULL,
            plan JSONB NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('completed', 'partial', 'failed')),
            target_count INTEGER NOT NULL,
            success_count INTEGER NOT NULL,
            failures JSONB NOT NULL DEFAULT '[]'::jsonb,
            duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX fanout_request_idx ON fanout_execution_log (request_id)")


def downgrade() -> None:
    op.execute("DROP TABLE fanout_execution_log")
    op.execute("DROP TABLE routing_log")
    op.execute("DROP TABLE butler_registry")
    op.execute("DROP TABLE message_inbox")
