"""The JSONB key-value state store of one butler (table `state`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.db.sql import affected, like_prefix
from butlers.stores.records import Record

MAX_KEY_LENGTH = 1024


class StateValueError(ValueError):
    """A key or value the store cannot keep; nothing was written."""


def check_key(key: str) -> None:
    if not key:
        raise StateValueError("key must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise StateValueError(f"key is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}")
    if "\x00" in key:
        raise StateValueError("key must not contain the NUL character (\\u0000)")


@dataclass(frozen=True, slots=True)
class StateEntry(Record):
    key: str
    value: JsonValue
    created_at: datetime
    updated_at: datetime


class StateStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def get(self, key: str) -> tuple[bool, JsonValue]:
        """(found, value): a stored JSON null is (True, None), a missing key (False, None)."""
        row = await self._pool.fetchrow("SELECT value FROM state WHERE key = $1", key)
        return (False, None) if row is None else (True, row["value"])

    async def set(self, key: str, value: Any) -> datetime:
        """Insert or overwrite; last writer wins. Returns the new `updated_at`."""
        check_key(key)
        try:
            text = dumps(value)
        except (TypeError, ValueError) as exc:
            raise StateValueError(f"value is not JSON: {exc}") from None
        try:
            updated_at: datetime = await self._pool.fetchval(
                """
                INSERT INTO state (key, value) VALUES ($1, $2::text::jsonb)
                ON CONFLICT (key) DO UPDATE
                    SET value = EXCLUDED.value, updated_at = clock_timestamp()
                RETURNING updated_at
                """,
                key,
                text,
            )
        except (asyncpg.DataError, asyncpg.exceptions.UntranslatableCharacterError) as exc:
            raise StateValueError(
                f"PostgreSQL cannot store this value ({exc.__class__.__name__}: {exc}); "
                "JSONB rejects the NUL character \\u0000 in strings. The stored value is unchanged."
            ) from None
        return updated_at

    async def list(self, prefix: str | None = None) -> list[StateEntry]:
        """Entries whose key starts with `prefix` literally (no wildcards), by key."""
        columns = StateEntry.columns()
        if prefix:
            rows = await self._pool.fetch(
                f"SELECT {columns} FROM state WHERE key LIKE $1 ESCAPE '\\' ORDER BY key",
                like_prefix(prefix),
            )
        else:
            rows = await self._pool.fetch(f"SELECT {columns} FROM state ORDER BY key")
        return [StateEntry.from_row(row) for row in rows]

    async def delete(self, key: str) -> bool:
        """True when the key existed."""
        return affected(await self._pool.execute("DELETE FROM state WHERE key = $1", key)) > 0
