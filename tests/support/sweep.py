"""Test sessions on a shared PostgreSQL server: a lease per live session, and a sweep of
what crashed sessions left behind.

Every test session names its schemas and roles with its tag (`t1a2b3_…`, `e2e_t1a2b3_…`)
and drops them at the end; a session that crashes (SIGKILL, a lost machine) cannot.
So each session takes a lease first: a row in `butlers_test.sessions` naming its tag,
and a session-level advisory lock keyed by the tag, held by a connection open for the
whole session. PostgreSQL releases that lock when the connection goes, whichever way
the process ends. The sweep drops the schemas and roles of every registered tag whose
lock it can take (its session is gone: a session takes the lock before it writes its
row, and holds it until it deletes the row); it never
touches a live session's objects (their locks are held), nor anything not named after
a registered tag (a user's schemas), nor a schema whose owner is not its own
same-named role (how test provisioning creates them).
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass, field

import asyncpg

from butlers.db.provision import quote_ident

REGISTRY_SCHEMA = "butlers_test"
# What a session's tag prefixes: integration schemas use the tag, e2e ones `e2e_` + tag.
PREFIXES = ("", "e2e_")


def lock_key(tag: str) -> int:
    """The advisory lock key of a session tag (a signed 64-bit integer)."""
    digest = hashlib.sha256(f"butlers-test-session:{tag}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def _ensure_registry(conn: asyncpg.Connection) -> None:
    await conn.execute(
        f"""
        CREATE SCHEMA IF NOT EXISTS {REGISTRY_SCHEMA};
        CREATE TABLE IF NOT EXISTS {REGISTRY_SCHEMA}.sessions (
            tag TEXT PRIMARY KEY,
            started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            host TEXT NOT NULL,
            pid INTEGER NOT NULL
        );
        REVOKE ALL ON SCHEMA {REGISTRY_SCHEMA} FROM PUBLIC;
        """
    )


@dataclass
class Lease:
    """A live test session's claim on its tag; `release()` when the session ends."""

    tag: str
    conn: asyncpg.Connection = field(repr=False)

    async def release(self) -> None:
        try:
            await self.conn.execute(
                f"DELETE FROM {REGISTRY_SCHEMA}.sessions WHERE tag = $1", self.tag
            )
        finally:
            await self.conn.close()


async def take_lease(admin_dsn: str, tag: str) -> Lease:
    """Register `tag` as a live session: the lock first, then the row, on one connection
    that stays open until `Lease.release` (or until the process dies)."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        async with conn.transaction():
            # Serialized: two sessions creating the registry at once would collide.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key("registry"))
            await _ensure_registry(conn)
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", lock_key(tag)):
            raise RuntimeError(f"test session tag {tag!r} is held by a live session")
        await conn.execute(
            f"INSERT INTO {REGISTRY_SCHEMA}.sessions (tag, host, pid) VALUES ($1, $2, $3) "
            "ON CONFLICT (tag) DO UPDATE SET started_at = now(), host = $2, pid = $3",
            tag,
            socket.gethostname(),
            os.getpid(),
        )
    except BaseException:
        await conn.close()
        raise
    return Lease(tag, conn)


@dataclass(frozen=True)
class Swept:
    tag: str
    schemas: list[str]
    roles: list[str]


async def sweep(admin_dsn: str) -> list[Swept]:
    """Drop the schemas and roles of every registered session that is gone."""
    conn = await asyncpg.connect(admin_dsn)
    swept: list[Swept] = []
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key("registry"))
            await _ensure_registry(conn)
        tags = await conn.fetch(f"SELECT tag FROM {REGISTRY_SCHEMA}.sessions ORDER BY started_at")
        for record in tags:
            tag = record["tag"]
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", lock_key(tag)):
                continue  # its session is alive
            try:
                swept.append(await _drop_tag(conn, tag))
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", lock_key(tag))
    finally:
        await conn.close()
    return swept


async def _drop_tag(conn: asyncpg.Connection, tag: str) -> Swept:
    prefixes = [prefix + tag for prefix in PREFIXES]
    schemas = [
        r["nspname"]
        for r in await conn.fetch(
            "SELECT n.nspname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner "
            "WHERE r.rolname = n.nspname "
            "AND EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(n.nspname, p)) "
            "ORDER BY 1",
            prefixes,
        )
    ]
    roles = [
        r["rolname"]
        for r in await conn.fetch(
            "SELECT rolname FROM pg_roles WHERE NOT rolsuper "
            "AND EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(rolname, p)) "
            "ORDER BY 1",
            prefixes,
        )
    ]
    async with conn.transaction():
        for schema in schemas:
            await conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(schema)} CASCADE")
        for role in roles:
            await conn.execute(f"DROP OWNED BY {quote_ident(role)}")
            await conn.execute(f"DROP ROLE {quote_ident(role)}")
        await conn.execute(f"DELETE FROM {REGISTRY_SCHEMA}.sessions WHERE tag = $1", tag)
    return Swept(tag, schemas, roles)
