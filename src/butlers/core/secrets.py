"""Where a butler's credentials come from: its own secrets store, then the shared
store, then its environment; the first that has a value wins.

`SecretResolver.load()` reads both stores at start-up (modules check their credentials
then, through `ModuleContext.credential`); `get()` reads afresh, for a value written
while the butler runs (an OAuth grant). A value that does not open (a key missing from
the keyring) is reported per name and never falls back silently to an older environment
value.

While the butler runs, `refresh()` reads both stores again and tells its listeners (the
modules, the log redactor) which names now resolve to something else: the butler's own
secret tools call it after each write, and `watch()` calls it when a digest of both
stores changes (the shared store is written by the dashboard, another process).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import asyncpg

from butlers.db.provision import quote_ident
from butlers.secretbox import KeyringError, KeySource
from butlers.stores.secrets import SecretStore, sealed_rows

log = logging.getLogger(__name__)
OWN_TABLE = "secrets"
SHARED_TABLE = "shared_secrets"
Listener = Callable[[frozenset[str]], Awaitable[None]]


def shared_table(schema: str) -> str:
    return f"{quote_ident(schema)}.{SHARED_TABLE}"


@dataclass
class SecretResolver:
    pool: asyncpg.Pool
    keys: KeySource
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    shared_schema: str | None = None  # the dashboard's schema holding `shared_secrets`
    values: dict[str, str] = field(default_factory=dict, repr=False)
    sources: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    # Called with the names whose value changed, after a refresh that changed any.
    listeners: list[Listener] = field(default_factory=list, repr=False)
    digest: str | None = field(default=None, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def own(self) -> SecretStore:
        return SecretStore(self.pool, OWN_TABLE)

    def _tables(self) -> list[tuple[str, str]]:
        """(source, table), the winning one last."""
        tables = [("shared", shared_table(self.shared_schema))] if self.shared_schema else []
        return [*tables, ("store", OWN_TABLE)]

    async def load(self) -> None:
        """Read every set value of both stores (own over shared); never raises."""
        values: dict[str, str] = {}
        sources: dict[str, str] = {}
        errors: dict[str, str] = {}
        keyring = None
        try:
            self.digest = await self.fingerprint()  # before the rows: a later write is seen
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("secrets: stores not readable: %s", exc)
            self.digest = None
        try:
            keyring = self.keys.keyring()
        except KeyringError as exc:
            log.warning("secrets: %s", exc)
        for source, table in self._tables():
            try:
                rows = await sealed_rows(self.pool, table)
            except (asyncpg.UndefinedTableError, asyncpg.InsufficientPrivilegeError) as exc:
                log.info("secrets: %s store not readable yet (%s)", source, exc)
                continue
            for name, kid, blob in rows:
                if keyring is None:
                    errors[name] = (
                        f"secret {name} is stored ({source}) but this butler has no secrets "
                        "key (BUTLERS_SECRETS_KEY)"
                    )
                    continue
                if kid not in keyring.ids():
                    keyring = self.keys.keyring(reload=True) or keyring
                try:
                    values[name] = keyring.decrypt(kid, blob, name)
                    sources[name] = source
                    errors.pop(name, None)
                except KeyringError as exc:
                    errors[name] = str(exc)
        self.values, self.sources, self.errors = values, sources, errors
        if errors:
            log.warning("secrets that do not open: %s", "; ".join(errors.values()))

    async def fingerprint(self) -> str:
        """A digest of what both stores hold (names, sealing keys, write times); it
        changes with every write, deletion or re-sealing."""
        parts = []
        for source, table in self._tables():
            try:
                digest = await self.pool.fetchval(
                    "SELECT md5(coalesce(string_agg(key || ' ' || coalesce(key_id, '') || ' ' "
                    f"|| updated_at::text, ',' ORDER BY key), '')) FROM {table} "
                    "WHERE value IS NOT NULL"
                )
            except (asyncpg.UndefinedTableError, asyncpg.InsufficientPrivilegeError):
                digest = "unreadable"
            parts.append(f"{source}:{digest}")
        return " ".join(parts)

    def _resolved(self) -> dict[str, tuple[str, str]]:
        return {n: ("value", v) for n, v in self.values.items()} | {
            n: ("error", e) for n, e in self.errors.items()
        }

    async def refresh(self) -> frozenset[str]:
        """Read both stores again; tell the listeners the names that now resolve to
        another value (set, changed, deleted: back to the environment's, or unreadable)."""
        async with self._lock:
            before = self._resolved()
            await self.load()
            after = self._resolved()
        changed = frozenset(
            n for n in before.keys() | after.keys() if before.get(n) != after.get(n)
        )
        if changed:
            log.info("secrets changed while running: %s", ", ".join(sorted(changed)))
            for listener in list(self.listeners):
                try:
                    await listener(changed)
                except Exception:
                    log.exception("a listener of changed secrets failed")
        return changed

    async def watch(self, interval: float) -> None:
        """Refresh whenever the stores' digest changes, checked every `interval` s."""
        while True:
            await asyncio.sleep(interval)
            try:
                if await self.fingerprint() != self.digest:
                    await self.refresh()
            except (asyncpg.PostgresError, OSError) as exc:
                log.warning("secrets: could not check the stores for changes: %s", exc)
            except Exception:
                log.exception("secrets: checking the stores for changes failed")

    def cached(self, name: str) -> str | None:
        """The value from the last load, else the environment's."""
        if name in self.values:
            return self.values[name]
        if name in self.errors:
            raise KeyringError(self.errors[name])
        return self.environ.get(name) or None

    def source(self, name: str) -> str | None:
        if name in self.values:
            return self.sources[name]
        return "environment" if self.environ.get(name) else None

    async def get(self, name: str) -> str | None:
        """The value as stored now: own store, shared store, environment."""
        keyring = self.keys.keyring()
        for _source, table in reversed(self._tables()):
            try:
                store = SecretStore(self.pool, table)
                if keyring is None:
                    meta = await store.get(name)
                    if meta is not None and meta.is_set:
                        self.keys.require()
                    continue
                try:
                    value = await store.value(name, keyring)
                except KeyringError:
                    value = await store.value(name, self.keys.require(reload=True))
            except (asyncpg.UndefinedTableError, asyncpg.InsufficientPrivilegeError):
                continue
            if value is not None:
                return value
        return self.environ.get(name) or None
