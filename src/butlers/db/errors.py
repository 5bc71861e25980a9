"""PostgreSQL errors as a reason a machine can act on and a message a person can."""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg

from butlers.errors import DatabaseError

# What an admin usually has to change when PostgreSQL refuses with this SQLSTATE.
_HINTS = {
    "42501": "the admin role needs CREATEROLE and CREATE on the database (or to be a superuser)",
    "28P01": "the password in the DSN is wrong",
    "28000": "the role does not exist or pg_hba.conf does not let it in",
    "3D000": "the database named in the DSN does not exist",
}


def describe_postgres_error(exc: asyncpg.PostgresError) -> tuple[str, str]:
    """(reason, message): the reason is asyncpg's class name without `Error`, e.g.
    `InsufficientPrivilege`; the message carries the SQLSTATE and a hint when known."""
    name = type(exc).__name__
    reason = name.removesuffix("Error") or "PostgresError"
    if reason in {"Postgres", "PostgresError"}:
        reason = "PostgresError"
    sqlstate = getattr(exc, "sqlstate", None) or "?????"
    message = f"{exc} (SQLSTATE {sqlstate})"
    hint = _HINTS.get(sqlstate)
    return reason, f"{message}; {hint}" if hint else message


def unreachable(dsn: str, exc: BaseException) -> DatabaseError:
    where = urlsplit(dsn)
    detail = str(exc) or type(exc).__name__
    return DatabaseError(
        f"cannot connect to PostgreSQL at {where.hostname}:{where.port or 5432}: {detail}",
        reason="DatabaseUnreachable",
    )
