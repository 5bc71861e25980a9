"""Prompt-cache tokens per model call and per session.

`llm_calls.cache_write_tokens` is the input a call wrote to the provider's prompt cache
(Anthropic bills it above input); `sessions.cached_tokens` and
`sessions.cache_write_tokens` sum a session's calls, so costs and cache savings need
no join.

Revision ID: core_0009
Revises: core_0008
"""

from alembic import op

revision = "core_0009"
down_revision = "core_0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE llm_calls ADD COLUMN cache_write_tokens INTEGER")
    op.execute("ALTER TABLE sessions ADD COLUMN cached_tokens INTEGER")
    op.execute("ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER")


def downgrade() -> None:
    op.execute("ALTER TABLE sessions DROP COLUMN cache_write_tokens")
    op.execute("ALTER TABLE sessions DROP COLUMN cached_tokens")
    op.execute("ALTER TABLE llm_calls DROP COLUMN cache_write_tokens")
