"""The dashboard's own schema: its migration chain (the audit log)."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from butlers import migrations
from butlers.db.provision import quote_ident

DASHBOARD_CHAIN = migrations.Chain("dashboard", Path(__file__).parent / "migrations")


async def at_head(dsn: str, schema: str) -> bool:
    """Whether the chain is at head already (one query; no Alembic run)."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        rows = await conn.fetch(
            f"SELECT version_num FROM {quote_ident(schema)}.{DASHBOARD_CHAIN.version_table}"
        )
    except asyncpg.UndefinedTableError:
        return False
    finally:
        await conn.close()
    return {r[0] for r in rows} == set(migrations.heads(DASHBOARD_CHAIN))


async def migrate(dsn: str, schema: str) -> None:
    """Bring the dashboard's schema to head, as the dashboard's own role."""
    if not await at_head(dsn, schema):
        await migrations.upgrade(dsn, schema, [DASHBOARD_CHAIN])
