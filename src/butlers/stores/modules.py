"""The owner's runtime module overrides of one butler (table `disabled_modules`).

A row means "this module of `spec.modules` is off until the owner enables it again";
no row means the spec decides. Read by the module loader at start, written by the
butler's `module_set_enabled` tool, read by the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from butlers.stores.records import Record

MAX_ROWS = 1000  # far above the number of modules there are


@dataclass(frozen=True, slots=True)
class DisabledModule(Record):
    module: str
    disabled_by: str
    disabled_at: datetime


COLUMNS = DisabledModule.columns()


async def disabled_modules(pool: asyncpg.Pool) -> dict[str, DisabledModule]:
    """Every module the owner disabled, by name."""
    rows = await pool.fetch(
        f"SELECT {COLUMNS} FROM disabled_modules ORDER BY module LIMIT {MAX_ROWS}"
    )
    return {r["module"]: DisabledModule.from_row(r) for r in rows}


async def disable_module(pool: asyncpg.Pool, module: str, by: str) -> DisabledModule:
    """Record `module` as disabled by `by` (a repeat keeps the first row)."""
    row = await pool.fetchrow(
        "INSERT INTO disabled_modules (module, disabled_by) VALUES ($1, $2) "
        f"ON CONFLICT (module) DO UPDATE SET module = EXCLUDED.module RETURNING {COLUMNS}",
        module,
        by,
    )
    assert row is not None
    return DisabledModule.from_row(row)


async def enable_module(pool: asyncpg.Pool, module: str) -> bool:
    """Forget the override of `module`; whether there was one."""
    row = await pool.fetchrow("DELETE FROM disabled_modules WHERE module = $1 RETURNING 1", module)
    return row is not None
