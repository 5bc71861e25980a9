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

MAX_KEY_LENGTH = 1024  # characters, and UTF-8 bytes (a B-tree entry must fit a page)
MAX_VALUE_BYTES = 1024 * 1024  # JSON text of one value


class StateValueError(ValueError):
    """A key or value the store cannot keep; nothing was written."""


def check_key(key: str) -> None:
    if not key:
        raise StateValueError("key must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise StateValueError(f"key is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}")
    size = len(key.encode())
    if size > MAX_KEY_LENGTH:
        raise StateValueError(f"key is {size} bytes of UTF-8; the limit is {MAX_KEY_LENGTH} bytes")
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
        size = len(text.encode())
        if size > MAX_VALUE_BYTES:
            raise StateValueError(
                f"value is {size} bytes of JSON; the limit is {MAX_VALUE_BYTES} bytes (1 MiB). "
                "Split it over several keys. The stored value is unchanged."
            )
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

    async def list(
        self,
        prefix: str | None = None,
        *,
        after: str | None = None,
        limit: int = 100,
        budget: int = 1024 * 1024,
    ) -> tuple[list[StateEntry], bool]:
        """(entries, more): entries whose key starts with `prefix` literally (no
        wildcards) and sorts after `after`, by key; at most `limit` of them and about
        `budget` bytes of values (at least one). Values past the budget are not read
        out of the database."""
        rows = await self._pool.fetch(
            """
            SELECT key, CASE WHEN fits THEN value END AS value, created_at, updated_at, fits
            FROM (
                SELECT key, value, created_at, updated_at,
                       sum(octet_length(value::text)) OVER (ORDER BY key)
                           - octet_length(value::text) < $4 AS fits
                FROM state
                WHERE ($1::text IS NULL OR key LIKE $1 ESCAPE '\\')
                  AND ($2::text IS NULL OR key > $2)
                ORDER BY key
                LIMIT $3 + 1
            ) page
            ORDER BY key
            """,
            like_prefix(prefix) if prefix else None,
            after,
            limit,
            budget,
        )
        entries: list[StateEntry] = []
        for row in rows[:limit]:
            if not row["fits"] and entries:
                break
            entries.append(StateEntry.from_row(row))
        return entries, len(entries) < len(rows)

    async def delete(self, key: str) -> bool:
        """True when the key existed."""
        return affected(await self._pool.execute("DELETE FROM state WHERE key = $1", key)) > 0
