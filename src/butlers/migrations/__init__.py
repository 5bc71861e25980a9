"""Alembic migration chains, run into one butler's schema.

A chain is an independent Alembic script directory with its own version table
(`alembic_version_<chain>`) inside the butler's schema: `core` for every butler,
then one per enabled module. Migrations run as the butler's own role, over
asyncpg, with `search_path` pinned to the schema, so DDL lands there.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from butlers.db.provision import quote_ident


@dataclass(frozen=True)
class Chain:
    name: str
    directory: Path

    @property
    def version_table(self) -> str:
        return f"alembic_version_{self.name}"


CORE = Chain("core", Path(__file__).parent / "core")


def _config(chain: Chain, schema: str, connection: Any = None) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(chain.directory))
    config.attributes.update(
        connection=connection, schema=schema, version_table=chain.version_table
    )
    return config


@cache
def heads(chain: Chain) -> frozenset[str]:
    """The head revisions of a chain: every revision no other revision builds on.

    Read from the `revision` / `down_revision` literals of its scripts, without
    Alembic: a butler checks its heads for `/ready`, and Alembic's script loader
    (with SQLAlchemy) would add ~20 MB to every butler process. A script this cannot
    read (no literal revision, `depends_on`) gets Alembic's answer instead.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in sorted((chain.directory / "versions").glob("*.py")):
        found = _revision_literals(script)
        if found is None:
            return _alembic_heads(chain)
        revision, down = found
        revisions.add(revision)
        parents.update(down)
    return frozenset(revisions - parents)


def _revision_literals(script: Path) -> tuple[str, tuple[str, ...]] | None:
    """(revision, down revisions) of a migration script, or None when they are no
    plain literals or the script names dependencies (`depends_on`) Alembic must
    resolve. Branch labels only name revisions: they change no head."""
    values: dict[str, object] = {}
    for node in ast.parse(script.read_text(), str(script)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                values[target.id] = ...  # not a literal
    revision, down = values.get("revision"), values.get("down_revision", ...)
    if values.get("depends_on") or not isinstance(revision, str):
        return None
    if down is None:
        return revision, ()
    if isinstance(down, str):
        return revision, (down,)
    if isinstance(down, tuple | list) and all(isinstance(d, str) for d in down):
        return revision, tuple(down)
    return None


def _alembic_heads(chain: Chain) -> frozenset[str]:
    from alembic.script import ScriptDirectory

    return frozenset(ScriptDirectory.from_config(_config(chain, "")).get_heads())


# Alembic's `context` and `op` are process-global proxies: one migration at a time.
_alembic_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}


def _alembic_lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    return _alembic_locks.setdefault(loop, asyncio.Lock())


async def _with_connection(dsn: str, schema: str, work: Callable[[Any], Any]) -> Any:
    import asyncpg
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    async def connect() -> Any:
        # asyncpg reads the DSN itself, as the butler's pool does: a libpq URI with
        # `sslmode`, `sslrootcert`, ... (SQLAlchemy would pass each query parameter on
        # as a keyword asyncpg does not take).
        return await asyncpg.connect(dsn, server_settings={"search_path": schema}, timeout=10)

    engine = create_async_engine("postgresql+asyncpg://", poolclass=NullPool, async_creator=connect)
    try:
        async with _alembic_lock(), engine.begin() as conn:
            await conn.execute(text(f"SET LOCAL search_path TO {quote_ident(schema)}"))
            return await conn.run_sync(work)
    finally:
        await engine.dispose()


async def upgrade(
    dsn: str,
    schema: str,
    chains: Sequence[Chain],
    revision: str = "heads",
    *,
    reader_role: str | None = None,
) -> None:
    """Upgrade every chain, in order, inside one transaction.

    With `reader_role` (the dashboard's role), the schema's owner then grants it
    read access to every table, when that role exists.
    """
    from alembic import command

    def work(connection: Any) -> None:
        for chain in chains:
            command.upgrade(_config(chain, schema, connection), revision)
        if reader_role:
            from butlers.db.readers import grant_read_sync

            grant_read_sync(connection, schema, reader_role)

    await _with_connection(dsn, schema, work)


async def downgrade(dsn: str, schema: str, chain: Chain, revision: str) -> None:
    from alembic import command

    def work(connection: Any) -> None:
        command.downgrade(_config(chain, schema, connection), revision)

    await _with_connection(dsn, schema, work)


async def current(dsn: str, schema: str, chains: Iterable[Chain]) -> dict[str, frozenset[str]]:
    """The applied revisions of each chain (empty when never migrated)."""
    from alembic.runtime.migration import MigrationContext

    def work(connection: Any) -> dict[str, frozenset[str]]:
        result = {}
        for chain in chains:
            context = MigrationContext.configure(
                connection,
                opts={"version_table": chain.version_table, "version_table_schema": schema},
            )
            result[chain.name] = frozenset(context.get_current_heads())
        return result

    return dict(await _with_connection(dsn, schema, work))
