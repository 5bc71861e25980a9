"""Shared Alembic environment: every chain's env.py calls `run_migrations()`."""

from __future__ import annotations

from alembic import context


def run_migrations() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "butlers migrations run through `butlers migrate` (or butlers.migrations.upgrade), "
            "which passes a connection"
        )
    context.configure(
        connection=connection,
        version_table=config.attributes["version_table"],
        version_table_schema=config.attributes["schema"],
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        context.run_migrations()
