"""The dashboard's role reads every butler table and writes none; each butler grants it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from butlers import migrations
from butlers.db.provision import Credentials, deprovision, provision
from butlers.db.readers import dashboard_role, dashboard_schema
from butlers.modules.registry import all_module_classes

ALL_CHAINS = [
    migrations.CORE,
    *(m.chain for m in all_module_classes() if m.chain is not None),
]


@pytest.fixture
async def reader(pg_admin_dsn: str, session_tag: str) -> AsyncIterator[Credentials]:
    prefix = f"{session_tag}rd_"
    credentials = await provision(
        pg_admin_dsn, dashboard_schema(prefix), role=dashboard_role(prefix)
    )
    try:
        yield credentials
    finally:
        await deprovision(pg_admin_dsn, credentials.schema, role=credentials.role)


@pytest.fixture
async def butler(
    pg_admin_dsn: str, session_tag: str, reader: Credentials
) -> AsyncIterator[Credentials]:
    """A butler schema with every chain there is (every table a butler can have)."""
    credentials = await provision(pg_admin_dsn, f"{session_tag}rd_butler")
    await migrations.upgrade(
        credentials.dsn(pg_admin_dsn), credentials.schema, ALL_CHAINS, reader_role=reader.role
    )
    try:
        yield credentials
    finally:
        await deprovision(pg_admin_dsn, credentials.schema)


async def tables(conn: asyncpg.Connection, schema: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1", schema
    )
    return [r[0] for r in rows]


async def test_reader_selects_every_table_and_every_write_is_refused(
    pg_admin_dsn: str, reader: Credentials, butler: Credentials
) -> None:
    conn = await asyncpg.connect(reader.dsn(pg_admin_dsn))
    try:
        names = await tables(conn, butler.schema)
        assert {"sessions", "state", "approvals", "message_inbox", "deliveries"} <= set(names)
        for table in names:
            relation = f'"{butler.schema}"."{table}"'
            await conn.fetch(f"SELECT * FROM {relation} LIMIT 1")
            column = await conn.fetchval(
                "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum = 1",
                relation,
            )
            for statement in (
                f"INSERT INTO {relation} DEFAULT VALUES",
                f'UPDATE {relation} SET "{column}" = "{column}"',
                f"DELETE FROM {relation}",
                f"TRUNCATE {relation}",
            ):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await conn.execute(statement)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'CREATE TABLE "{butler.schema}".intruder (x int)')
        await conn.execute(f'CREATE TABLE "{reader.schema}".own (x int)')  # its own schema
        await conn.execute(f'INSERT INTO "{reader.schema}".own VALUES (1)')
    finally:
        await conn.close()


async def test_tables_a_later_migration_adds_are_readable(
    pg_admin_dsn: str, reader: Credentials, butler: Credentials
) -> None:
    owner = await asyncpg.connect(butler.dsn(pg_admin_dsn))
    await owner.execute("CREATE TABLE added_later (x int)")
    await owner.execute("INSERT INTO added_later VALUES (42)")
    await owner.close()
    conn = await asyncpg.connect(reader.dsn(pg_admin_dsn))
    try:
        assert await conn.fetchval(f'SELECT x FROM "{butler.schema}".added_later') == 42
    finally:
        await conn.close()


async def test_a_butler_migrated_before_the_reader_existed_grants_at_its_next_migration(
    pg_admin_dsn: str, session_tag: str
) -> None:
    prefix = f"{session_tag}late_"
    early = await provision(pg_admin_dsn, f"{prefix}butler")
    dsn = early.dsn(pg_admin_dsn)
    role = dashboard_role(prefix)
    await migrations.upgrade(dsn, early.schema, [migrations.CORE], reader_role=role)
    reader = await provision(pg_admin_dsn, dashboard_schema(prefix), role=role)
    conn = await asyncpg.connect(reader.dsn(pg_admin_dsn))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch(f'SELECT * FROM "{early.schema}".sessions')
        await migrations.upgrade(dsn, early.schema, [migrations.CORE], reader_role=role)
        assert await conn.fetch(f'SELECT * FROM "{early.schema}".sessions') == []
    finally:
        await conn.close()
        await deprovision(pg_admin_dsn, early.schema)
        await deprovision(pg_admin_dsn, reader.schema, role=reader.role)


async def test_another_butler_cannot_read_through_the_grant(
    pg_admin_dsn: str, session_tag: str, butler: Credentials
) -> None:
    other = await provision(pg_admin_dsn, f"{session_tag}rd_other")
    conn = await asyncpg.connect(other.dsn(pg_admin_dsn))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch(f'SELECT * FROM "{butler.schema}".state')
    finally:
        await conn.close()
        await deprovision(pg_admin_dsn, other.schema)
