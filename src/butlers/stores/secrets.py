"""SQL of a secrets table: a butler's own (`secrets`) or the shared one (`shared_secrets`,
in the dashboard's schema). Values are sealed with a `secretbox.Keyring`; metadata is
readable without the key, values never leave this module except decrypted for the
process that holds the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from butlers.secretbox import Keyring
from butlers.stores.records import Record, expression

KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
MAX_VALUE_CHARS = 65536
MAX_CATEGORY_CHARS = 64
MAX_DESCRIPTION_CHARS = 1000
MAX_SECRETS = 1000  # rows per store; a listing is bounded by it
DEFAULT_CATEGORY = "general"


class SecretInputError(ValueError):
    """A key, value or field that cannot be stored; the message names what to fix."""


@dataclass(frozen=True, slots=True)
class SecretMeta(Record):
    key: str
    category: str
    description: str
    is_sensitive: bool
    is_set: bool = field(metadata=expression("value IS NOT NULL"))
    key_id: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    updated_by: str | None = None


def check_key(key: str) -> None:
    if not KEY_PATTERN.match(key):
        raise SecretInputError(
            f"secret key {key[:140]!r} is not valid: 1-128 characters, letters, digits, "
            "'_', '.', '-', starting with a letter or '_' (e.g. TELEGRAM_BOT_TOKEN)"
        )


def check_fields(value: str | None, category: str | None, description: str | None) -> None:
    if value is not None and not value:
        raise SecretInputError("the value is empty: send a value, or delete the secret")
    if value is not None and len(value) > MAX_VALUE_CHARS:
        raise SecretInputError(f"the value is {len(value)} characters; at most {MAX_VALUE_CHARS}")
    if value is not None and "\0" in value:
        raise SecretInputError("the value contains a NUL character")
    if category is not None and not 1 <= len(category) <= MAX_CATEGORY_CHARS:
        raise SecretInputError(f"category must be 1-{MAX_CATEGORY_CHARS} characters")
    if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
        raise SecretInputError(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")


class SecretStore:
    """One secrets table on `pool`; `table` may be schema-qualified (already quoted)."""

    def __init__(self, pool: asyncpg.Pool, table: str = "secrets") -> None:
        self._pool = pool
        self._table = table

    async def list(self) -> list[SecretMeta]:
        rows = await self._pool.fetch(
            f"SELECT {SecretMeta.columns()} FROM {self._table} ORDER BY key LIMIT {MAX_SECRETS}"
        )
        return [SecretMeta.from_row(r) for r in rows]

    async def get(self, key: str) -> SecretMeta | None:
        row = await self._pool.fetchrow(
            f"SELECT {SecretMeta.columns()} FROM {self._table} WHERE key = $1", key
        )
        return SecretMeta.from_row(row) if row else None

    async def put(
        self,
        key: str,
        *,
        keyring: Keyring | None,
        value: str | None = None,
        category: str | None = None,
        description: str | None = None,
        is_sensitive: bool | None = None,
        actor: str | None = None,
    ) -> SecretMeta:
        """Insert or update; fields left None keep their stored value (or the default)."""
        check_key(key)
        check_fields(value, category, description)
        kid, sealed = (None, None)
        if value is not None:
            if keyring is None:
                raise SecretInputError("no secrets key is configured in this process")
            kid, sealed = keyring.encrypt(value, key)
        async with self._pool.acquire() as conn, conn.transaction():
            count = await conn.fetchval(f"SELECT count(*) FROM {self._table}")
            exists = await conn.fetchval(
                f"SELECT 1 FROM {self._table} WHERE key = $1 FOR UPDATE", key
            )
            if not exists and count >= MAX_SECRETS:
                raise SecretInputError(
                    f"the store holds {MAX_SECRETS} secrets already; delete some first"
                )
            row = await conn.fetchrow(
                f"""
                INSERT INTO {self._table} AS s
                    (key, category, description, is_sensitive, value, key_id, updated_by)
                VALUES ($1, coalesce($2, '{DEFAULT_CATEGORY}'), coalesce($3, ''),
                        coalesce($4, TRUE), $5, $6, $7)
                ON CONFLICT (key) DO UPDATE SET
                    category = coalesce($2, s.category),
                    description = coalesce($3, s.description),
                    is_sensitive = coalesce($4, s.is_sensitive),
                    value = coalesce($5, s.value),
                    key_id = CASE WHEN $5::bytea IS NULL THEN s.key_id ELSE $6 END,
                    updated_at = now(),
                    updated_by = $7
                RETURNING {SecretMeta.columns()}
                """,
                key,
                category,
                description,
                is_sensitive,
                sealed,
                kid,
                actor,
            )
        return SecretMeta.from_row(row)

    async def delete(self, key: str) -> bool:
        status: str = await self._pool.execute(f"DELETE FROM {self._table} WHERE key = $1", key)
        return status != "DELETE 0"

    async def value(self, key: str, keyring: Keyring) -> str | None:
        row = await self._pool.fetchrow(
            f"SELECT value, key_id FROM {self._table} WHERE key = $1", key
        )
        if row is None or row["value"] is None:
            return None
        return keyring.decrypt(row["key_id"], bytes(row["value"]), key)

    async def values(self, keyring: Keyring) -> dict[str, str]:
        rows = await self._pool.fetch(
            f"SELECT key, value, key_id FROM {self._table} WHERE value IS NOT NULL "
            f"ORDER BY key LIMIT {MAX_SECRETS}"
        )
        return {r["key"]: keyring.decrypt(r["key_id"], bytes(r["value"]), r["key"]) for r in rows}

    async def reencrypt(self, keyring: Keyring) -> int:
        """Seal every value not under the keyring's first key with it; how many changed.
        One transaction: a value that no key opens leaves every row as it was."""
        changed = 0
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"SELECT key, value, key_id FROM {self._table} "
                "WHERE value IS NOT NULL AND key_id <> $1 FOR UPDATE",
                keyring.primary_id,
            )
            for row in rows:
                plain = keyring.decrypt(row["key_id"], bytes(row["value"]), row["key"])
                kid, sealed = keyring.encrypt(plain, row["key"])
                await conn.execute(
                    f"UPDATE {self._table} SET value = $2, key_id = $3 WHERE key = $1",
                    row["key"],
                    sealed,
                    kid,
                )
                changed += 1
        return changed


async def sealed_rows(pool: asyncpg.Pool, table: str) -> list[tuple[str, str, bytes]]:
    """(key, key id, sealed value) of every set secret of `table`."""
    rows = await pool.fetch(
        f"SELECT key, key_id, value FROM {table} WHERE value IS NOT NULL "
        f"ORDER BY key LIMIT {MAX_SECRETS}"
    )
    return [(r["key"], r["key_id"], bytes(r["value"])) for r in rows]
