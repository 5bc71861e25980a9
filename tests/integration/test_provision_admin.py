"""Provisioning as a CREATEROLE admin that is not a superuser (RDS, Cloud SQL, CNPG owners),
verify-before-repair, and passwords that never appear in SQL text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import pytest

from butlers.db import provision as provisioning
from butlers.db.provision import Credentials, deprovision, ensure, provision
from butlers.errors import DatabaseError
from tests.support import postgres
from tests.support.postgres import dsn_as, run_sql


async def _val(dsn: str, query: str, *args: object) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


@pytest.fixture
async def createrole_admin(pg_admin_dsn: str, session_tag: str) -> AsyncIterator[str]:
    async with postgres.createrole_admin(pg_admin_dsn, f"{session_tag}opadmin") as dsn:
        yield dsn


async def test_a_createrole_admin_provisions_a_working_isolated_butler(
    createrole_admin: str, pg_admin_dsn: str, session_tag: str
) -> None:
    a, b = f"{session_tag}cr_a", f"{session_tag}cr_b"
    creds_a = await provision(createrole_admin, a)
    creds_b = await provision(createrole_admin, b)
    try:
        await run_sql(creds_a.dsn(pg_admin_dsn), "CREATE TABLE notes (body text)")
        assert await _val(creds_a.dsn(pg_admin_dsn), "SELECT current_schema()") == a
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await _val(creds_b.dsn(pg_admin_dsn), f'SELECT count(*) FROM "{a}".notes')
        # The admin borrowed the membership for one transaction only.
        admin = urlsplit(createrole_admin).username
        assert not await _val(pg_admin_dsn, "SELECT pg_has_role($1, $2, 'USAGE')", admin, a)
        # Provisioning again (e.g. a resync that must repair) works as well.
        again = await provision(createrole_admin, a, password=creds_a.password)
        assert await _val(again.dsn(pg_admin_dsn), "SELECT count(*) FROM notes") == 0
    finally:
        await deprovision(createrole_admin, a)
        await deprovision(createrole_admin, b)
    gone = "SELECT count(*) FROM pg_roles WHERE rolname = ANY($1::text[])"
    assert await _val(pg_admin_dsn, gone, [a, b]) == 0
    assert await _val(pg_admin_dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", a) == 0


async def test_an_admin_without_createrole_gets_a_reason_and_a_hint(
    pg_admin_dsn: str, session_tag: str
) -> None:
    weak = f"{session_tag}weak"
    await run_sql(pg_admin_dsn, f"CREATE ROLE \"{weak}\" LOGIN PASSWORD 'weak-pw'")
    try:
        with pytest.raises(DatabaseError) as info:
            await provision(dsn_as(pg_admin_dsn, weak, "weak-pw"), f"{session_tag}nope")
        assert info.value.reason == "InsufficientPrivilege"
        assert "CREATEROLE" in str(info.value) and "42501" in str(info.value)
        with pytest.raises(DatabaseError) as info:
            await provision(dsn_as(pg_admin_dsn, weak, "wrong"), f"{session_tag}nope")
        assert info.value.reason == "InvalidPassword"
    finally:
        await run_sql(pg_admin_dsn, f'DROP ROLE "{weak}"')


async def test_unreachable_server_has_its_reason() -> None:
    with pytest.raises(DatabaseError) as info:
        await provision("postgresql://postgres:x@127.0.0.1:1/butlers", "nowhere")
    assert info.value.reason == "DatabaseUnreachable"


class _Recorder:
    """Every SQL text the admin connections of `provision` send, and how many there were."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.queries: list[str] = []
        self.connections = 0
        real = provisioning.connect_admin

        async def connect_admin(dsn: str) -> asyncpg.Connection:
            conn = await real(dsn)
            self.connections += 1
            conn.add_query_logger(lambda record: self.queries.append(record.query))
            return conn

        monkeypatch.setattr(provisioning, "connect_admin", connect_admin)


async def test_passwords_never_appear_in_sql_and_are_set_only_when_they_change(
    createrole_admin: str, pg_admin_dsn: str, session_tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = f"{session_tag}pwless"
    recorder = _Recorder(monkeypatch)
    creds = await ensure(createrole_admin, schema, password="first-Password-1")
    try:
        assert recorder.connections == 1
        assert not [q for q in recorder.queries if "first-Password-1" in q]
        assert [q for q in recorder.queries if "SCRAM-SHA-256$4096:" in q]
        # Nothing changed: verified as the butler's own role, the admin is not contacted.
        assert await ensure(createrole_admin, schema, password=creds.password) == creds
        assert recorder.connections == 1
        # The password changed (the Secret was edited): only then is it set again.
        recorder.queries.clear()
        await ensure(createrole_admin, schema, password="second-Password-2")
        assert recorder.connections == 2
        assert not [q for q in recorder.queries if "second-Password-2" in q]
        login = Credentials(schema=schema, role=schema, password="second-Password-2")
        assert await _val(login.dsn(pg_admin_dsn), "SELECT current_user") == schema
        # A broken search_path is repaired without touching the password.
        await run_sql(pg_admin_dsn, f'ALTER ROLE "{schema}" RESET search_path')
        recorder.queries.clear()
        await ensure(createrole_admin, schema, password="second-Password-2")
        assert not [q for q in recorder.queries if "PASSWORD" in q]
        assert await _val(login.dsn(pg_admin_dsn), "SELECT current_schema()") == schema
    finally:
        await deprovision(createrole_admin, schema)


async def test_a_schema_recorded_for_another_butler_is_refused(
    pg_admin_dsn: str, session_tag: str
) -> None:
    schema = f"{session_tag}claimed"
    await provision(pg_admin_dsn, schema, owner="home/health")
    try:
        await provision(pg_admin_dsn, schema, owner="home/health")
        with pytest.raises(DatabaseError) as info:
            await provision(pg_admin_dsn, schema, owner="work/health")
        assert info.value.reason == "SchemaOwnedByAnotherButler"
        assert "home/health" in str(info.value) and "work/health" in str(info.value)
    finally:
        await deprovision(pg_admin_dsn, schema)
