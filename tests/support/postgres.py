"""PostgreSQL roles for tests: admins as managed services give them, DSNs for other users."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg


def dsn_as(dsn: str, user: str, password: str) -> str:
    """The same server and database, logged in as another role."""
    parts = urlsplit(dsn)
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


async def run_sql(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@asynccontextmanager
async def createrole_admin(superuser_dsn: str, name: str) -> AsyncIterator[str]:
    """A login role with CREATEROLE and CREATE on the database, and nothing else: what RDS,
    Cloud SQL or a CloudNativePG owner gives. Yields its DSN; drops it afterwards."""
    database = urlsplit(superuser_dsn).path.lstrip("/")
    await run_sql(
        superuser_dsn,
        f"CREATE ROLE \"{name}\" LOGIN CREATEROLE NOSUPERUSER PASSWORD 'adm1n-pw'",
        f'GRANT CREATE ON DATABASE "{database}" TO "{name}"',
    )
    try:
        yield dsn_as(superuser_dsn, name, "adm1n-pw")
    finally:
        await run_sql(superuser_dsn, f'DROP OWNED BY "{name}"', f'DROP ROLE "{name}"')
