"""Per-butler schema and login role: verified first, repaired when needed, and dropped.

Every butler gets one schema and one role that owns it. The role can log in with
a generated password, uses its own schema by default, and has no privilege on
any other butler's schema. `butlers up` and the operator both call these.

What the admin connection may be: a superuser, or a role with `CREATEROLE` (and
`CREATE` on the database) and nothing more, which is all RDS, Cloud SQL, Azure or
a CloudNativePG application owner give. Such an admin cannot create a schema for
another role or drop its objects unless it is a member of that role, so it grants
itself the membership for the duration of one transaction and revokes it before
committing.

Passwords never appear in SQL text: roles get a SCRAM-SHA-256 verifier computed
here (as `\\password` in psql does), so `log_statement = ddl` logs no secret. A
password is set only when the role cannot log in with the one the caller holds.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import Enum
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg

from butlers.db.errors import describe_postgres_error, unreachable
from butlers.errors import DatabaseError

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# Serializes provisioning across processes (butlers up, several operators, test sessions).
_LOCK_KEY = 0x6275746C  # "butl"
CONNECT_TIMEOUT = 10.0
SCRAM_ITERATIONS = 4096
# Recorded on each schema, so a second Butler that maps to the same name is refused.
OWNER_COMMENT_PREFIX = "butlers.dev/owner="
PRINTABLE_ASCII = re.compile(r"^[\x21-\x7e]{1,256}$")


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
            "(lowercase letters, digits and underscores, starting with a letter, at most 63)",
            reason="InvalidName",
        )
    return f'"{name}"'


def quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def generate_password() -> str:
    return secrets.token_urlsafe(24)


def usable_password(password: str | None) -> bool:
    """A password this module can hash for PostgreSQL (printable ASCII: SASLprep is a no-op)."""
    return bool(password) and PRINTABLE_ASCII.match(password or "") is not None


def scram_verifier(password: str, salt: bytes | None = None) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802, RFC 7677)."""
    if not usable_password(password):
        raise ValueError("only printable ASCII passwords are hashed here")
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${SCRAM_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def owner_comment(owner: str) -> str:
    return f"{OWNER_COMMENT_PREFIX}{owner}"


async def connect(dsn: str, what: str = "PostgreSQL") -> asyncpg.Connection:
    """A connection, or a DatabaseError whose reason says what went wrong."""
    try:
        return await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT)
    except asyncpg.PostgresError as exc:
        reason, detail = describe_postgres_error(exc)
        where = urlsplit(dsn)
        raise DatabaseError(
            f"cannot log in to {what} at {where.hostname}:{where.port or 5432} "
            f"as {where.username!r}: {detail}",
            reason=reason,
        ) from exc
    except (OSError, TimeoutError) as exc:
        raise unreachable(dsn, exc) from exc


async def connect_admin(admin_dsn: str) -> asyncpg.Connection:
    return await connect(admin_dsn, "PostgreSQL (admin)")


class Check(Enum):
    """What `verify` found."""

    OK = "ok"
    LOGIN_FAILED = "login-failed"  # wrong password, or no such role: set the password
    NEEDS_REPAIR = "needs-repair"  # logs in, but the schema, owner or search_path is wrong


async def verify(server_dsn: str, credentials: Credentials, owner: str | None = None) -> Check:
    """Whether the butler's role logs in with its password and owns its schema as its default.

    A DatabaseError when the server cannot be reached or refuses for another reason.
    Opens one connection as the butler's role, never as the admin.
    """
    try:
        conn = await asyncpg.connect(credentials.dsn(server_dsn), timeout=CONNECT_TIMEOUT)
    except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError):
        return Check.LOGIN_FAILED  # both SQLSTATE class 28
    except asyncpg.PostgresError as exc:
        reason, detail = describe_postgres_error(exc)
        raise DatabaseError(f"checking schema {credentials.schema}: {detail}", reason) from exc
    except (OSError, TimeoutError) as exc:
        raise unreachable(server_dsn, exc) from exc
    try:
        row = await conn.fetchrow(
            "SELECT current_schema() AS current, pg_get_userbyid(n.nspowner) AS owner, "
            "obj_description(n.oid, 'pg_namespace') AS comment "
            "FROM pg_namespace n WHERE n.nspname = $1",
            credentials.schema,
        )
    except asyncpg.PostgresError as exc:
        reason, detail = describe_postgres_error(exc)
        raise DatabaseError(f"checking schema {credentials.schema}: {detail}", reason) from exc
    finally:
        await conn.close()
    if row is None or row["owner"] != credentials.role or row["current"] != credentials.schema:
        return Check.NEEDS_REPAIR
    if owner is not None and row["comment"] != owner_comment(owner):
        return Check.NEEDS_REPAIR
    return Check.OK


async def ensure(
    admin_dsn: str,
    schema: str,
    role: str | None = None,
    password: str | None = None,
    owner: str | None = None,
) -> Credentials:
    """Verify the butler's database, and provision only what is missing or wrong.

    With a usable `password` that already logs in, nothing is changed and the admin
    is not contacted. Otherwise `provision` repairs it, keeping that password (a
    caller that stored it need not rewrite anything), or a new one when there is none.
    """
    role = role or schema
    set_password = True
    if usable_password(password):
        assert password is not None
        known = Credentials(schema=schema, role=role, password=password)
        check = await verify(admin_dsn, known, owner)
        if check is Check.OK:
            return known
        set_password = check is Check.LOGIN_FAILED
    return await provision(
        admin_dsn, schema, role, password, owner=owner, set_password=set_password
    )


async def provision(
    admin_dsn: str,
    schema: str,
    role: str | None = None,
    password: str | None = None,
    *,
    owner: str | None = None,
    set_password: bool = True,
) -> Credentials:
    """Make sure `schema` and its owning login `role` exist, as the admin.

    Idempotent and serialized: existing data is never touched; each statement runs
    only when the catalog says it is needed. The role's password is set to
    `password` (a new one when None or unusable), as a SCRAM verifier; an existing
    role keeps its password with `set_password=False`. With an `owner` (e.g.
    `namespace/name`), the schema records it and one recorded for another is refused.
    """
    role = role or schema
    if not usable_password(password):
        password, set_password = generate_password(), True
    assert password is not None
    schema_q, role_q = quote_ident(schema), quote_ident(role)
    conn = await connect_admin(admin_dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            await _provision_locked(
                conn, schema, (role, role_q), schema_q, (password, set_password), owner
            )
    except asyncpg.PostgresError as exc:
        reason, detail = describe_postgres_error(exc)
        raise DatabaseError(f"provisioning schema {schema}: {detail}", reason) from exc
    finally:
        await conn.close()
    return Credentials(schema=schema, role=role, password=password)


async def _provision_locked(
    conn: asyncpg.Connection,
    schema: str,
    names: tuple[str, str],
    schema_q: str,
    password_change: tuple[str, bool],
    owner: str | None,
) -> None:
    """Everything `provision` does, inside its locked transaction."""
    role, role_q = names
    password, set_password = password_change
    existing = await conn.fetchrow(
        "SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = $1", role
    )
    if existing is None:
        verifier = quote_literal(scram_verifier(password))
        await conn.execute(
            f"CREATE ROLE {role_q} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {verifier}"
        )
    else:
        if existing["rolsuper"]:
            raise DatabaseError(
                f"role {role!r} already exists and is a superuser: it cannot be a butler's "
                "role; pick another schema prefix",
                reason="RoleConflict",
            )
        changes = "" if existing["rolcanlogin"] else " LOGIN"
        if set_password:
            changes += f" PASSWORD {quote_literal(scram_verifier(password))}"
        if changes:
            await conn.execute(f"ALTER ROLE {role_q}{changes}")
    borrowed = await _borrow_membership(conn, role, role_q)
    current = await conn.fetchrow(
        "SELECT pg_get_userbyid(nspowner) AS owner, obj_description(oid, 'pg_namespace') "
        "AS comment, EXISTS (SELECT 1 FROM aclexplode(nspacl) WHERE grantee = 0) AS public "
        "FROM pg_namespace WHERE nspname = $1",
        schema,
    )
    if current is None:
        await conn.execute(f"CREATE SCHEMA {schema_q} AUTHORIZATION {role_q}")
    elif current["owner"] != role:
        raise DatabaseError(
            f"schema {schema!r} already exists and belongs to role {current['owner']!r}, "
            f"not {role!r}; pick another schema prefix or drop it",
            reason="SchemaOwnedByAnotherRole",
        )
    recorded = current["comment"] if current is not None else None
    if owner is not None:
        claimed = (recorded or "").startswith(OWNER_COMMENT_PREFIX)
        if claimed and recorded != owner_comment(owner):
            raise DatabaseError(
                f"schema {schema!r} belongs to Butler "
                f"{(recorded or '').removeprefix(OWNER_COMMENT_PREFIX)}, not {owner}; "
                "two Butlers map to one schema: rename one of them or set another schema prefix",
                reason="SchemaOwnedByAnotherButler",
            )
        if recorded != owner_comment(owner):
            await conn.execute(
                f"COMMENT ON SCHEMA {schema_q} IS {quote_literal(owner_comment(owner))}"
            )
    if current is not None and current["public"]:
        await conn.execute(f"REVOKE ALL ON SCHEMA {schema_q} FROM PUBLIC")
    settings = await conn.fetchval(
        "SELECT setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
        "WHERE r.rolname = $1 AND s.setdatabase = 0",
        role,
    )
    if f"search_path={schema}" not in (settings or []) and (
        f'search_path="{schema}"' not in (settings or [])
    ):
        await conn.execute(f"ALTER ROLE {role_q} SET search_path = {schema_q}")
    can_connect = await conn.fetchval(
        "SELECT has_database_privilege($1, current_database(), 'CONNECT')", role
    )
    if not can_connect:
        database = await conn.fetchval("SELECT current_database()")
        await conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO {role_q}')
    if borrowed:
        await conn.execute(f"REVOKE {role_q} FROM CURRENT_USER")


async def _borrow_membership(conn: asyncpg.Connection, role: str, role_q: str) -> bool:
    """Make the admin a member of `role` (to own its schema's objects) unless it already is.

    Returns whether a grant was made (the caller revokes it in the same transaction).
    A superuser needs nothing. From PostgreSQL 16 on, creating a schema for a role
    needs the SET option and acting as its owner needs INHERIT, both granted here.
    """
    info = await conn.fetchrow(
        "SELECT rolsuper, current_setting('server_version_num')::int AS version "
        "FROM pg_roles WHERE rolname = current_user"
    )
    if info is None or info["rolsuper"]:
        return False
    if info["version"] >= 160000:
        member = await conn.fetchval(
            "SELECT pg_has_role(current_user, $1, 'SET') "
            "AND pg_has_role(current_user, $1, 'USAGE')",
            role,
        )
        if member:
            return False
        await conn.execute(f"GRANT {role_q} TO CURRENT_USER WITH INHERIT TRUE, SET TRUE")
        return True
    if await conn.fetchval("SELECT pg_has_role(current_user, $1, 'USAGE')", role):
        return False
    await conn.execute(f"GRANT {role_q} TO CURRENT_USER")
    return True


async def deprovision(admin_dsn: str, schema: str, role: str | None = None) -> None:
    """Drop the schema with everything in it, and the role. Idempotent."""
    role = role or schema
    schema_q, role_q = quote_ident(schema), quote_ident(role)
    conn = await connect_admin(admin_dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                borrowed = await _borrow_membership(conn, role, role_q)
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema_q} CASCADE")
                await conn.execute(f"DROP OWNED BY {role_q}")
                if borrowed:
                    await conn.execute(f"REVOKE {role_q} FROM CURRENT_USER")
                await conn.execute(f"DROP ROLE {role_q}")
            else:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema_q} CASCADE")
    except asyncpg.PostgresError as exc:
        reason, detail = describe_postgres_error(exc)
        raise DatabaseError(f"dropping schema {schema}: {detail}", reason) from exc
    finally:
        await conn.close()
