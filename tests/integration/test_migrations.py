"""The core chain: upgrade, downgrade, upgrade again, into the butler's own schema."""

from __future__ import annotations

import asyncpg
import pytest

from butlers import migrations
from butlers.db.provision import deprovision, provision
from butlers.modules.loader import module_chains
from butlers.modules.registry import all_module_classes, module_class
from tests.support.contracts import REQUIRED_SESSION_FIELDS

MODULES_WITH_CHAINS = [m.name for m in all_module_classes() if m.chain is not None]


async def _tables(dsn: str, schema: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
        return {r["table_name"] for r in rows}
    finally:
        await conn.close()


async def test_upgrade_downgrade_upgrade(pg_admin_dsn: str, session_tag: str) -> None:
    schema = f"{session_tag}mig"
    creds = await provision(pg_admin_dsn, schema)
    dsn = creds.dsn(pg_admin_dsn)
    try:
        await migrations.upgrade(dsn, schema, [migrations.CORE])
        assert {"state", "scheduled_tasks", "sessions", "alembic_version_core"} <= await _tables(
            dsn, schema
        )
        assert await migrations.current(dsn, schema, [migrations.CORE]) == {
            "core": migrations.heads(migrations.CORE)
        }

        await migrations.downgrade(dsn, schema, migrations.CORE, "base")
        assert await _tables(dsn, schema) == {"alembic_version_core"}
        assert await migrations.current(dsn, schema, [migrations.CORE]) == {"core": frozenset()}

        await migrations.upgrade(dsn, schema, [migrations.CORE])
        assert {"state", "scheduled_tasks", "sessions"} <= await _tables(dsn, schema)
    finally:
        await deprovision(pg_admin_dsn, schema)


async def test_upgrade_at_head_changes_nothing(butler_schema) -> None:  # type: ignore[no-untyped-def]
    await butler_schema.pool.execute("INSERT INTO state (key, value) VALUES ('k', '1')")
    await migrations.upgrade(butler_schema.dsn, butler_schema.schema, [migrations.CORE])
    assert await butler_schema.pool.fetchval("SELECT value FROM state WHERE key = 'k'") == 1


async def test_version_table_lives_in_the_butler_schema(butler_schema) -> None:  # type: ignore[no-untyped-def]
    schema = await butler_schema.pool.fetchval(
        "SELECT table_schema FROM information_schema.tables "
        "WHERE table_name = 'alembic_version_core'"
    )
    assert schema == butler_schema.schema


async def test_expected_columns_and_indexes_exist(butler_schema) -> None:  # type: ignore[no-untyped-def]
    columns = {
        r["column_name"]
        for r in await butler_schema.pool.fetch(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = $1 AND table_name = 'sessions'",
            butler_schema.schema,
        )
    }
    assert {*REQUIRED_SESSION_FIELDS, "error"} <= columns
    indexes = {
        r["indexname"]
        for r in await butler_schema.pool.fetch(
            "SELECT indexname FROM pg_indexes WHERE schemaname = $1", butler_schema.schema
        )
    }
    assert {
        "state_pkey",
        "state_key_prefix_idx",
        "scheduled_tasks_name_key",
        "sessions_pkey",
    } <= indexes


@pytest.mark.parametrize("module", MODULES_WITH_CHAINS)
async def test_module_chain_upgrade_downgrade_upgrade(
    pg_admin_dsn: str, session_tag: str, module: str
) -> None:
    """Each module's chain, beside `core` and the chains it depends on: up creates its
    tables, down to base removes exactly them (other chains untouched), up again
    restores them; the version table follows each step."""
    chains = [migrations.CORE, *module_chains({module: {}} | _dependencies(module))]
    chain = module_class(module).chain
    assert chain is not None and chain in chains
    schema = f"{session_tag}mig_{module}"
    creds = await provision(pg_admin_dsn, schema)
    dsn = creds.dsn(pg_admin_dsn)
    try:
        await migrations.upgrade(dsn, schema, [c for c in chains if c is not chain])
        others = await _tables(dsn, schema)
        await migrations.upgrade(dsn, schema, chains)
        full = await _tables(dsn, schema)
        own = full - others
        assert chain.version_table in own and len(own) > 1, f"{module} created {own}"
        assert await migrations.current(dsn, schema, [chain]) == {
            chain.name: migrations.heads(chain)
        }

        await migrations.downgrade(dsn, schema, chain, "base")
        assert await _tables(dsn, schema) == full - own | {chain.version_table}
        assert await migrations.current(dsn, schema, [chain]) == {chain.name: frozenset()}

        await migrations.upgrade(dsn, schema, chains)
        assert await _tables(dsn, schema) == full
        assert await migrations.current(dsn, schema, [chain]) == {
            chain.name: migrations.heads(chain)
        }
    finally:
        await deprovision(pg_admin_dsn, schema)


def _dependencies(module: str) -> dict[str, dict[str, object]]:
    """Every module `module` needs, transitively, enabled with its defaults."""
    found: dict[str, dict[str, object]] = {}
    todo = list(module_class(module).dependencies)
    while todo:
        name = todo.pop()
        if name not in found:
            found[name] = {}
            todo += module_class(name).dependencies
    return found
