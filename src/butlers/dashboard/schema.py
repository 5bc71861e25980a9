"""The dashboard's own schema: its migration chain (the audit log)."""

from __future__ import annotations

from pathlib import Path

from butlers import migrations

DASHBOARD_CHAIN = migrations.Chain("dashboard", Path(__file__).parent / "migrations")


async def migrate(dsn: str, schema: str) -> None:
    """Bring the dashboard's schema to head, as the dashboard's own role."""
    await migrations.upgrade(dsn, schema, [DASHBOARD_CHAIN])
