"""The PostgreSQL server of a local ecosystem: embedded by default, or BUTLERS_DATABASE_URL."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from butlers.db.embedded import EmbeddedPostgres
from butlers.db.provision import Credentials
from butlers.ecosystem.state import DatabaseInfo

log = logging.getLogger(__name__)


@dataclass
class DatabaseServer:
    admin_dsn: str
    embedded: EmbeddedPostgres | None = None
    owned: bool = False

    def describe(self) -> DatabaseInfo:
        parts = urlsplit(self.admin_dsn)
        host, port, database = parts.hostname, parts.port or 5432, parts.path.lstrip("/")
        if self.embedded:
            return DatabaseInfo(
                kind="embedded",
                host=host,
                port=port,
                database=database,
                data_dir=str(self.embedded.pgdata),
                admin_dsn=self.admin_dsn,
            )
        return DatabaseInfo(
            kind="external",
            host=host,
            port=port,
            database=database,
            url=mask_password(self.admin_dsn),
        )

    def stop(self) -> None:
        """Stop the server if this process started it."""
        if self.embedded and self.owned:
            self.embedded.stop()
            self.owned = False


def mask_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def open_database(
    data_dir: Path, database_url: str | None, *, fsync: bool = True, adopt: bool = False
) -> DatabaseServer:
    """Start (or reuse) the embedded server under `data_dir`, or use `database_url`.

    A server that runs already is stopped by `stop()` only when `adopt` is set (the
    caller knows no other process of this data directory uses it)."""
    if database_url:
        return DatabaseServer(admin_dsn=database_url)
    embedded = EmbeddedPostgres(data_dir / "postgres", fsync=fsync)
    started = embedded.start()
    if not started and adopt:
        log.warning("adopting the embedded database left running in %s", embedded.pgdata)
    return DatabaseServer(admin_dsn=embedded.admin_dsn(), embedded=embedded, owned=started or adopt)


class CredentialFile:
    """`<data-dir>/credentials.json` (mode 0600): the generated role passwords."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Credentials]:
        if not self.path.exists():
            return {}
        raw = json.loads(self.path.read_text())
        return {schema: Credentials(schema=schema, **entry) for schema, entry in raw.items()}

    def save(self, credentials: dict[str, Credentials]) -> None:
        data = {c.schema: {"role": c.role, "password": c.password} for c in credentials.values()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        tmp.chmod(0o600)
        tmp.replace(self.path)
