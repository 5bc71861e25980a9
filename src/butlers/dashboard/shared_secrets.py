"""The shared secrets store: `shared_secrets` in the dashboard's own schema.

The dashboard writes it itself (no butler owns it), sealed with the same key the
butlers hold, and grants each butler's role (named like its schema) `SELECT` on it
so that butlers read shared credentials (the Google OAuth grant, a key several
butlers use) beneath their own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import asyncpg

from butlers.dashboard.db import DatabaseManager
from butlers.db.provision import quote_ident
from butlers.secretbox import KeySource
from butlers.stores.secrets import SecretStore

log = logging.getLogger(__name__)
TABLE = "shared_secrets"


class SharedSecrets:
    def __init__(self, db: DatabaseManager, keys: KeySource, schema: str) -> None:
        self._db = db
        self.keys = keys
        self.schema = schema
        self._granted: set[str] = set()

    async def store(self) -> SecretStore:
        return SecretStore(await self._db.own_pool(), TABLE)

    async def grant(self, roles: Iterable[str]) -> None:
        """Let each butler role read the shared store (roles that exist; once each)."""
        todo = sorted(set(roles) - self._granted)
        if not todo:
            return
        try:
            pool = await self._db.own_pool()
            async with pool.acquire() as conn:
                self._granted |= await grant_readers(conn, self.schema, todo)
        except Exception as exc:
            log.warning("could not let butlers read the shared secrets: %s", exc)


async def grant_readers(conn: asyncpg.Connection, schema: str, roles: Iterable[str]) -> set[str]:
    """As the owner of `schema`: let each existing role of `roles` read the shared store;
    the roles granted."""
    existing = {
        r[0]
        for r in await conn.fetch(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])", sorted(set(roles))
        )
    }
    schema_q = quote_ident(schema)
    for role in sorted(existing):
        await conn.execute(f"GRANT USAGE ON SCHEMA {schema_q} TO {quote_ident(role)}")
        await conn.execute(f"GRANT SELECT ON {schema_q}.{TABLE} TO {quote_ident(role)}")
    return existing
