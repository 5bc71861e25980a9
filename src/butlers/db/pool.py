"""asyncpg pools pinned to one butler's schema, with JSON codecs."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("jsonb", "json"):
        await conn.set_type_codec(name, encoder=_dumps, decoder=json.loads, schema="pg_catalog")


async def create_pool(
    dsn: str,
    schema: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    application_name: str = "butlers",
    server_settings: dict[str, str] | None = None,
) -> asyncpg.Pool:
    """A pool whose connections see `schema` first and decode JSON/JSONB to Python."""
    settings = {"search_path": schema, "application_name": application_name}
    settings.update(server_settings or {})
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        timeout=CONNECT_TIMEOUT,
        command_timeout=COMMAND_TIMEOUT,
        init=_init_connection,
        server_settings=settings,
    )
    assert pool is not None
    return pool


def dumps(value: Any) -> str:
    """JSON text for a `$n::text::jsonb` parameter, so that JSON null stays JSON null."""
    return _dumps(value)
