"""Read-only access to a butler's schema for the dashboard's login role.

The dashboard reads every butler's tables by SQL as one role (`butlers_dashboard`
by default) that may SELECT in butler schemas and write only in its own schema.
Each butler grants that access itself, as the owner of its schema, at the end of
every migration: no superuser and no membership in the butler's role is needed,
and tables a later migration adds are covered by the default privileges.
"""

from __future__ import annotations

from typing import Any

from butlers.db.provision import quote_ident

DASHBOARD_ROLE = "butlers_dashboard"
DASHBOARD_SCHEMA = "dashboard"


def dashboard_role(prefix: str = "") -> str:
    """The dashboard's role name for a schema prefix (roles are cluster-wide)."""
    return f"{prefix}{DASHBOARD_ROLE}"


def dashboard_schema(prefix: str = "") -> str:
    return f"{prefix}{DASHBOARD_SCHEMA}"


def grant_read_statements(schema: str, reader: str) -> list[str]:
    """What the schema's owner runs so that `reader` can read (and only read) it."""
    schema_q, reader_q = quote_ident(schema), quote_ident(reader)
    return [
        f"GRANT USAGE ON SCHEMA {schema_q} TO {reader_q}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema_q} TO {reader_q}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema_q} GRANT SELECT ON TABLES TO {reader_q}",
    ]


def grant_read_sync(connection: Any, schema: str, reader: str) -> bool:
    """On a SQLAlchemy connection inside a migration: grant when `reader` exists.

    Returns False (and grants nothing) when the role does not exist yet; the next
    migration run grants it.
    """
    from sqlalchemy import text

    exists = connection.execute(
        text("SELECT 1 FROM pg_roles WHERE rolname = :name"), {"name": reader}
    ).scalar()
    if not exists:
        return False
    for statement in grant_read_statements(schema, reader):
        connection.execute(text(statement))
    return True
