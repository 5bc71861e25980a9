"""`DatabaseManager`: one asyncpg pool per butler schema, and cross-butler fan-out.

Every pool connects as the dashboard's read-only role with `search_path` pinned
to one butler's schema; one more pool reaches the dashboard's own schema (the
audit log). Pools open lazily, so a database that is down at start-up only fails
the requests that need it. A fan-out runs the same query on every (or some)
butler concurrently, each bounded by a timeout: a butler that fails yields no
rows and its name in `failed`, never a silently empty page; when every butler
failed because the server itself is unreachable, that is `DATABASE_UNAVAILABLE`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import asyncpg

from butlers.dashboard.errors import ButlerNotFound, DatabaseUnavailable
from butlers.db.pool import create_pool

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
DEFAULT_TIMEOUT = 5.0
STATEMENT_TIMEOUT_MS = 10_000
APPLICATION_NAME = "butlers-dashboard"
# Failures of the server or the connection (as opposed to a query on one schema).
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InterfaceError,
    asyncpg.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
)


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"


def is_connection_failure(exc: BaseException) -> bool:
    return isinstance(exc, CONNECTION_ERRORS)


@dataclass
class FanRead(Generic[T]):
    """A read's result per butler, and the butlers whose part is missing (name → reason)."""

    results: dict[str, T] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def failed_butlers(self) -> list[str]:
        return sorted(self.failed)

    def items(self) -> Iterable[tuple[str, T]]:
        for name in sorted(self.results):
            yield name, self.results[name]

    def rows(self: FanRead[list[R]]) -> Iterable[tuple[str, R]]:
        """Each row of a read that returns rows, with its butler, butlers in name order."""
        for name in sorted(self.results):
            for row in self.results[name]:
                yield name, row


# Rows of the same SQL per butler (a butler that failed has an empty list too).
FanOut = FanRead[list[asyncpg.Record]]


class DatabaseManager:
    def __init__(
        self,
        dsn: str,
        *,
        own_schema: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_size: int = 3,
        prepare_own: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._dsn = dsn
        self._own_schema = own_schema
        self._prepare_own = prepare_own  # e.g. migrate the own schema, before first use
        self.timeout = timeout
        self._max_size = max_size
        self._schemas: dict[str, str] = {}
        self._pools: dict[str, asyncpg.Pool] = {}
        self._own: asyncpg.Pool | None = None
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def dsn(self) -> str:
        return self._dsn

    # -- butlers --------------------------------------------------------------

    def add_butler(self, name: str, schema: str) -> None:
        """Register a butler; its pool opens on first use (re-adding a new schema reopens)."""
        if self._schemas.get(name) == schema:
            return
        old = self._pools.pop(name, None)
        if old is not None:
            asyncio.get_running_loop().create_task(old.close())
        self._schemas[name] = schema

    async def remove_butler(self, name: str) -> None:
        self._schemas.pop(name, None)
        pool = self._pools.pop(name, None)
        if pool is not None:
            await pool.close()

    @property
    def names(self) -> list[str]:
        return sorted(self._schemas)

    def schema(self, name: str) -> str:
        try:
            return self._schemas[name]
        except KeyError:
            raise ButlerNotFound(f"no butler named {name!r}", butler=name) from None

    async def _open(self, key: str, schema: str, max_size: int) -> asyncpg.Pool:
        return await create_pool(
            self._dsn,
            schema,
            min_size=1,
            max_size=max_size,
            application_name=APPLICATION_NAME,
            server_settings={"statement_timeout": str(STATEMENT_TIMEOUT_MS)},
        )

    async def pool(self, name: str) -> asyncpg.Pool:
        """The pool of a butler's schema (opened now if needed)."""
        schema = self.schema(name)
        pool = self._pools.get(name)
        if pool is not None:
            return pool
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            pool = self._pools.get(name)
            if pool is None:
                pool = await self._open(name, schema, self._max_size)
                if self._schemas.get(name) != schema:  # re-registered meanwhile
                    await pool.close()
                    return await self.pool(name)
                self._pools[name] = pool
            return pool

    async def own_pool(self) -> asyncpg.Pool:
        """The pool of the dashboard's own schema (audit log)."""
        if self._own_schema is None:
            raise DatabaseUnavailable("the dashboard has no schema of its own configured")
        if self._own is None:
            lock = self._locks.setdefault("\0own", asyncio.Lock())
            async with lock:
                if self._own is None:
                    try:
                        if self._prepare_own is not None:
                            await self._prepare_own()
                        self._own = await self._open("\0own", self._own_schema, 2)
                    except Exception as exc:
                        raise DatabaseUnavailable(
                            f"cannot reach the dashboard schema: {describe_failure(exc)}"
                        ) from exc
        return self._own

    # -- queries ----------------------------------------------------------------

    async def fetch(self, name: str, sql: str, *args: Any) -> list[asyncpg.Record]:
        """Rows from one butler's schema; any database failure is DATABASE_UNAVAILABLE."""
        return list(await self.read(name, lambda pool: pool.fetch(sql, *args)))

    async def read(self, name: str, read: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
        """`read(pool)` on one butler's pool (a store's read); failures as in `fetch`."""
        try:
            async with asyncio.timeout(self.timeout):
                return await read(await self.pool(name))
        except ButlerNotFound:
            raise
        except (TimeoutError, asyncpg.PostgresError, *CONNECTION_ERRORS) as exc:
            raise DatabaseUnavailable(
                f"cannot read the schema of butler {name!r}: {describe_failure(exc)}",
                butler=name,
            ) from exc

    async def fan_read(
        self,
        read: Callable[[asyncpg.Pool], Awaitable[T]],
        butler_names: Sequence[str],
        *,
        timeout: float | None = None,
    ) -> FanRead[T]:
        """`read(pool)` (a store's read) on every butler of `butler_names` concurrently,
        each bounded by the timeout: a butler that fails has no result and its reason in
        `failed`; when every butler failed to connect, that is DATABASE_UNAVAILABLE."""
        return await self._fan(lambda _name, pool: read(pool), butler_names, timeout)

    async def fan_out(
        self,
        sql: str,
        *args: Any,
        butler_names: Sequence[str] | None = None,
        per_butler_args: dict[str, Sequence[Any]] | None = None,
        timeout: float | None = None,
    ) -> FanOut:
        """Run `sql` on every registered butler (or `butler_names`) concurrently; a butler
        that failed has no rows. `per_butler_args` replaces `args` for the butlers it
        names (keyset cursors)."""
        chosen = per_butler_args or {}

        async def rows(name: str, pool: asyncpg.Pool) -> list[asyncpg.Record]:
            return list(await pool.fetch(sql, *chosen.get(name, args)))

        names = self.names if butler_names is None else butler_names
        outcome = await self._fan(rows, names, timeout)
        for name in outcome.failed:
            outcome.results.setdefault(name, [])
        return outcome

    async def _fan(
        self,
        read: Callable[[str, asyncpg.Pool], Awaitable[T]],
        butler_names: Sequence[str],
        timeout: float | None,
    ) -> FanRead[T]:
        limit = timeout or self.timeout
        outcome: FanRead[T] = FanRead()
        connection_failures: list[bool] = []

        async def one(name: str) -> None:
            try:
                async with asyncio.timeout(limit):
                    outcome.results[name] = await read(name, await self.pool(name))
            except ButlerNotFound:
                outcome.failed[name] = "unknown butler"
            except (TimeoutError, asyncpg.PostgresError, *CONNECTION_ERRORS) as exc:
                reason = describe_failure(exc)
                log.warning("fan-out: butler %s failed: %s", name, reason)
                outcome.failed[name] = reason
                connection_failures.append(is_connection_failure(exc))

        await asyncio.gather(*(one(name) for name in butler_names))
        if not outcome.results and connection_failures and all(connection_failures):
            raise DatabaseUnavailable(
                "the database cannot be reached: " + "; ".join(sorted(set(outcome.failed.values())))
            )
        return outcome

    async def fetch_own(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """Rows from the dashboard's own schema (audit log)."""
        try:
            async with asyncio.timeout(self.timeout):
                pool = await self.own_pool()
                return list(await pool.fetch(sql, *args))
        except DatabaseUnavailable:
            raise
        except (TimeoutError, asyncpg.PostgresError, *CONNECTION_ERRORS) as exc:
            raise DatabaseUnavailable(
                f"cannot read the dashboard's schema: {describe_failure(exc)}"
            ) from exc

    async def fetchrow(self, name: str, sql: str, *args: Any) -> asyncpg.Record | None:
        rows = await self.fetch(name, sql, *args)
        return rows[0] if rows else None

    async def close(self) -> None:
        pools = [*self._pools.values(), *([self._own] if self._own else [])]
        self._pools.clear()
        self._own = None
        await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)
