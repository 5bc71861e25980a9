"""episodes, facts and rules, searchable by full text and by embedding.

Embeddings are `real[]` of 384 floats, searched exactly in the butler
(`modules/memory/vectors.py`).

Revision ID: memory_0001
Revises:
"""

from alembic import op

revision = "memory_0001"
down_revision = None
branch_labels = ("memory",)
depends_on = None

PERMANENCE = "('permanent', 'stable', 'standard', 'volatile')"
PROVENANCE = "('owner', 'butler', 'untrusted')"
VALIDITY = "('active', 'superseded', 'faded', 'retracted')"


def upgrade() -> None:
    op.execute("CREATE SEQUENCE memory_change_seq")
    op.execute(
        """
        CREATE TABLE memory_episodes (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            session_id UUID,
            prompt TEXT NOT NULL,
            outcome TEXT NOT NULL DEFAULT '',
            summary TEXT NOT NULL DEFAULT '',
            consolidated BOOLEAN NOT NULL DEFAULT FALSE,
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            expires_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp() + interval '7 days'
        )
        """
    )
    op.execute("CREATE INDEX memory_episodes_expires_idx ON memory_episodes (expires_at)")
    op.execute(
        f"""
        CREATE TABLE memory_facts (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            subject TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 200),
            predicate TEXT NOT NULL CHECK (length(predicate) BETWEEN 1 AND 200),
            content TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 4000),
            importance REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
            confidence REAL NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
            permanence TEXT NOT NULL DEFAULT 'standard' CHECK (permanence IN {PERMANENCE}),
            provenance TEXT NOT NULL DEFAULT 'owner' CHECK (provenance IN {PROVENANCE}),
            source_session UUID,
            source_message TEXT,
            source_channel TEXT,
            validity TEXT NOT NULL DEFAULT 'active' CHECK (validity IN {VALIDITY}),
            supersedes UUID REFERENCES memory_facts (id) ON DELETE SET NULL,
            superseded_by UUID REFERENCES memory_facts (id) ON DELETE SET NULL,
            tags TEXT[] NOT NULL DEFAULT '{{}}',
            shared_with TEXT[] NOT NULL DEFAULT '{{}}',
            embedding REAL[] NOT NULL CHECK (cardinality(embedding) = 384),
            search TSVECTOR GENERATED ALWAYS AS (
                to_tsvector('english', subject || ' ' || replace(predicate, '_', ' ')
                    || ' ' || content)
            ) STORED,
            change_seq BIGINT NOT NULL DEFAULT nextval('memory_change_seq'),
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            last_used_at TIMESTAMPTZ
        )
        """
    )
    # One active fact per subject and predicate: a newer one supersedes it.
    op.execute(
        "CREATE UNIQUE INDEX memory_facts_current_idx ON memory_facts (subject, predicate) "
        "WHERE validity = 'active'"
    )
    op.execute("CREATE INDEX memory_facts_search_idx ON memory_facts USING gin (search)")
    op.execute("CREATE INDEX memory_facts_change_idx ON memory_facts (change_seq)")
    op.execute(
        """
        CREATE TABLE memory_rules (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            content TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 4000),
            helpful INTEGER NOT NULL DEFAULT 0 CHECK (helpful >= 0),
            harmful INTEGER NOT NULL DEFAULT 0 CHECK (harmful >= 0),
            provenance TEXT NOT NULL DEFAULT 'owner',
            validity TEXT NOT NULL DEFAULT 'active'
                CHECK (validity IN ('active', 'faded', 'retracted')),
            tags TEXT[] NOT NULL DEFAULT '{}',
            shared_with TEXT[] NOT NULL DEFAULT '{}',
            embedding REAL[] NOT NULL CHECK (cardinality(embedding) = 384),
            search TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
            change_seq BIGINT NOT NULL DEFAULT nextval('memory_change_seq'),
            created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )
        """
    )
    op.execute("CREATE INDEX memory_rules_search_idx ON memory_rules USING gin (search)")
    op.execute("CREATE INDEX memory_rules_change_idx ON memory_rules (change_seq)")
    # Every change takes a new sequence number, so the butler's vector index catches up
    # by reading only the rows changed since it last looked.
    op.execute(
        """
        CREATE FUNCTION memory_touch() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.change_seq := nextval('memory_change_seq');
            NEW.updated_at := clock_timestamp();
            RETURN NEW;
        END $$
        """
    )
    for table in ("memory_facts", "memory_rules"):
        op.execute(
            f"CREATE TRIGGER {table}_touch BEFORE UPDATE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION memory_touch()"
        )


def downgrade() -> None:
    op.execute("DROP TABLE memory_rules, memory_facts, memory_episodes")
    op.execute("DROP FUNCTION memory_touch()")
    op.execute("DROP SEQUENCE memory_change_seq")
