"""Where a butler's credentials come from: its own secrets store, then the shared
store, then its environment; the first that has a value wins.

`SecretResolver.load()` reads both stores once at start-up (modules check their
credentials then, through `ModuleContext.credential`); `get()` reads afresh, for a
value written while the butler runs (an OAuth grant). A value that does not open
(a key missing from the keyring) is reported per name and never falls back silently
to an older environment value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import asyncpg

from butlers.db.provision import quote_ident
from butlers.secretbox import KeyringError, KeySource
from butlers.stores.secrets import SecretStore, sealed_rows

log = logging.getLogger(__name__)
OWN_TABLE = "secrets"
SHARED_TABLE = "shared_secrets"


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
