"""Provisioning against real PostgreSQL: idempotent, serialized, isolated."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from butlers.db.provision import connect_admin, deprovision, provision
from butlers.errors import DatabaseError


async def schema_exists(admin_dsn: str, schema: str) -> bool:
    conn = await connect_admin(admin_dsn)
    try:
        return bool(await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema))
    finally:
        await conn.close()


async def test_provisioning_twice_keeps_data(pg_admin_dsn: str, session_tag: str) -> None:
    schema = f"{session_tag}idem"
    creds = await provision(pg_admin_dsn, schema)
    conn = await asyncpg.connect(creds.dsn(pg_admin_dsn))
    await conn.execute("CREATE TABLE kept (x int)")
    await conn.execute("INSERT INTO kept VALUES (7)")
    await conn.close()
    again = await provision(pg_admin_dsn, schema, password=creds.password)
    conn = await asyncpg.connect(again.dsn(pg_admin_dsn))
    assert await conn.fetchval("SELECT x FROM kept") == 7
    await conn.close()
    await deprovision(pg_admin_dsn, schema)


async def test_concurrent_provisioning_is_serialized(pg_admin_dsn: str, session_tag: str) -> None:
    schema = f"{session_tag}race"
    results = await asyncio.gather(
        *(provision(pg_admin_dsn, schema, password="pw") for _ in range(8))
    )
    assert {r.schema for r in results} == {schema}
    assert await schema_exists(pg_admin_dsn, schema)
    await deprovision(pg_admin_dsn, schema)


async def test_role_uses_its_own_schema_by_default(pg_admin_dsn: str, session_tag: str) -> None:
    schema = f"{session_tag}own"
    creds = await provision(pg_admin_dsn, schema)
    conn = await asyncpg.connect(creds.dsn(pg_admin_dsn))
    await conn.execute("CREATE TABLE t (x int)")
    assert (
        await conn.fetchval(
            "SELECT table_schema FROM information_schema.tables WHERE table_name='t'"
        )
        == schema
    )
    await conn.close()
    await deprovision(pg_admin_dsn, schema)


async def test_role_cannot_touch_another_butlers_schema(
    pg_admin_dsn: str, session_tag: str
) -> None:
    a, b = f"{session_tag}iso_a", f"{session_tag}iso_b"
    creds_a = await provision(pg_admin_dsn, a)
    creds_b = await provision(pg_admin_dsn, b)
    conn_b = await asyncpg.connect(creds_b.dsn(pg_admin_dsn))
    await conn_b.execute("CREATE TABLE secret (x int)")
    await conn_b.close()
    conn_a = await asyncpg.connect(creds_a.dsn(pg_admin_dsn))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn_a.fetch(f'SELECT * FROM "{b}".secret')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn_a.execute(f'CREATE TABLE "{b}".intruder (x int)')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn_a.execute("CREATE SCHEMA sneaky")
    finally:
        await conn_a.close()
        await deprovision(pg_admin_dsn, a)
        await deprovision(pg_admin_dsn, b)


async def test_wrong_password_is_refused(pg_admin_dsn: str, session_tag: str) -> None:
    from butlers.db.provision import Credentials

    schema = f"{session_tag}pw"
    creds = await provision(pg_admin_dsn, schema)
    wrong = Credentials(schema=schema, role=creds.role, password="not-it")
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(wrong.dsn(pg_admin_dsn))
    await deprovision(pg_admin_dsn, schema)


async def test_deprovision_drops_schema_and_role_and_is_idempotent(
    pg_admin_dsn: str, session_tag: str
) -> None:
    schema = f"{session_tag}gone"
    await provision(pg_admin_dsn, schema)
    await deprovision(pg_admin_dsn, schema)
    await deprovision(pg_admin_dsn, schema)
    assert not await schema_exists(pg_admin_dsn, schema)
    conn = await asyncpg.connect(pg_admin_dsn)
    assert await conn.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = $1", schema) == 0
    await conn.close()


async def test_schema_owned_by_someone_else_is_a_clear_error(
    pg_admin_dsn: str, session_tag: str
) -> None:
    schema = f"{session_tag}taken"
    conn = await asyncpg.connect(pg_admin_dsn)
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.close()
    with pytest.raises(DatabaseError, match="belongs to role 'postgres'"):
        await provision(pg_admin_dsn, schema, role=f"{session_tag}other")
    conn = await asyncpg.connect(pg_admin_dsn)
    await conn.execute(f'DROP SCHEMA "{schema}"')
    await conn.execute(f'DROP ROLE IF EXISTS "{session_tag}other"')
    await conn.close()


async def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(DatabaseError, match="cannot connect to PostgreSQL at 127.0.0.1:1"):
        await provision("postgresql://postgres:x@127.0.0.1:1/butlers", "nowhere")
