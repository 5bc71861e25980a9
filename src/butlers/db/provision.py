"""Per-butler schema and login role: created idempotently, serialized, and dropped.

Every butler gets one schema and one role that owns it. The role can log in with
a generated password, uses its own schema by default, and has no privilege on
any other butler's schema. `butlers up` and the operator both call these.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg

from butlers.errors import DatabaseError

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# Serializes provisioning across processes (butlers up, several operators, test sessions).
_LOCK_KEY = 0x6275746C  # "butl"
CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Credentials:
    """What a butler needs to reach its own schema."""

    schema: str
    role: str
    password: str

    def dsn(self, server_dsn: str) -> str:
        """The server DSN with this role's user and password."""
        parts = urlsplit(server_dsn)
        host = parts.hostname or "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{quote(self.role, safe='')}:{quote(self.password, safe='')}@{host}"
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def quote_ident(name: str) -> str:
    if not IDENTIFIER.match(name):
        raise DatabaseError(
            f"{name!r} is not a valid schema or role name "
            "(lowercase letters, digits and underscores, starting with a letter, at most 63)"
        )
    return f'"{name}"'


def quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def generate_password() -> str:
    return secrets.token_urlsafe(24)


async def connect_admin(admin_dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(admin_dsn, timeout=CONNECT_TIMEOUT)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        where = urlsplit(admin_dsn)
        raise DatabaseError(
            f"cannot connect to PostgreSQL at {where.hostname}:{where.port or 5432}: {exc}"
        ) from exc


async def provision(
    admin_dsn: str, schema: str, role: str | None = None, password: str | None = None
) -> Credentials:
    """Make sure `schema` and its owning login `role` exist; set the role's password.

    Idempotent: existing data is never touched. With `password=None` a new one is
    generated and set (callers keep credentials, e.g. in a Secret, and pass them back).
    """
    role = role or schema
    password = password or generate_password()
    schema_q, role_q = quote_ident(schema), quote_ident(role)
    conn = await connect_admin(admin_dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
            verb = "ALTER" if exists else "CREATE"
            await conn.execute(
                f"{verb} ROLE {role_q} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                f"PASSWORD {quote_literal(password)}"
            )
            owner = await conn.fetchval(
                "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = $1", schema
            )
            if owner is None:
                await conn.execute(f"CREATE SCHEMA {schema_q} AUTHORIZATION {role_q}")
            elif owner != role:
                raise DatabaseError(
                    f"schema {schema!r} already exists and belongs to role {owner!r}, "
                    f"not {role!r}; pick another schema prefix or drop it"
                )
            await conn.execute(f"REVOKE ALL ON SCHEMA {schema_q} FROM PUBLIC")
            await conn.execute(f"ALTER ROLE {role_q} SET search_path = {schema_q}")
            database = await conn.fetchval("SELECT current_database()")
            await conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO {role_q}')
    finally:
        await conn.close()
    return Credentials(schema=schema, role=role, password=password)


async def deprovision(admin_dsn: str, schema: str, role: str | None = None) -> None:
    """Drop the schema with everything in it, and the role. Idempotent."""
    role = role or schema
    schema_q, role_q = quote_ident(schema), quote_ident(role)
    conn = await connect_admin(admin_dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema_q} CASCADE")
            if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                await conn.execute(f"DROP OWNED BY {role_q}")
                await conn.execute(f"DROP ROLE {role_q}")
    finally:
        await conn.close()
