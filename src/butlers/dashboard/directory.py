"""Where the dashboard learns which butlers exist: a local ecosystem or a cluster.

A directory answers `butlers()` (name → `ButlerInfo`) and refreshes itself; the
dashboard calls `refresh()` periodically, so butlers added later (a new Butler
resource, a restarted ecosystem) appear without a restart. `DataDirDirectory`
reads `<data-dir>/ecosystem.json` and the specs `butlers up` wrote beside it;
`KubeDirectory` (kube.py) lists Butler resources from the API server.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from butlers.errors import RosterError
from butlers.roster import load_butler_file
from butlers.spec import ButlerResource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ButlerInfo:
    name: str
    url: str  # MCP over streamable HTTP, .../mcp
    schema: str
    modules: tuple[str, ...] = ()
    resource: ButlerResource | None = field(default=None, compare=False, repr=False)
    source: str | None = None  # where the spec came from (file, or namespace/name)
    log_path: Path | None = None
    kube: dict[str, Any] | None = field(default=None, compare=False)  # phase, conditions

    @property
    def base_url(self) -> str:
        return self.url.removesuffix("/mcp")

    @property
    def description(self) -> str:
        return self.resource.spec.description if self.resource else ""


class Directory(Protocol):
    """The butlers of one ecosystem, kept current by `refresh()`."""

    def butlers(self) -> dict[str, ButlerInfo]: ...

    async def refresh(self) -> bool:
        """Re-read the source; True when the set of butlers (or their endpoints) changed."""
        ...

    @property
    def mcp_token(self) -> str | None:
        """The bearer token the ecosystem's butlers expect from a user (None: none)."""
        ...

    def describe(self) -> str: ...


class DataDirDirectory:
    """The butlers of a local ecosystem (`butlers up`), from `<data-dir>/ecosystem.json`.

    When the file disappears (the ecosystem stopped) the last known butlers stay
    listed: their probes report them down rather than them silently vanishing.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / "ecosystem.json"
        self._stamp: tuple[int, int] | None = None
        self._butlers: dict[str, ButlerInfo] = {}
        self._token: str | None = None
        self.state: dict[str, Any] = {}

    def butlers(self) -> dict[str, ButlerInfo]:
        return dict(self._butlers)

    @property
    def mcp_token(self) -> str | None:
        return self._token

    def describe(self) -> str:
        return "local ecosystem (ecosystem.json)"

    async def refresh(self) -> bool:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return False
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return False
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:  # being rewritten: try again next time
            log.debug("cannot read %s yet: %s", self.path, exc)
            return False
        self._stamp = stamp
        # Only what the dashboard uses: never the admin DSN nor the butlers' DSNs.
        self.state = {"dashboard": _pick(state.get("dashboard"), "dsn", "schema")}
        self._token = state.get("token") or None
        butlers = {
            name: self._info(name, entry) for name, entry in (state.get("butlers") or {}).items()
        }
        changed = butlers != self._butlers
        self._butlers = butlers
        return changed

    def _info(self, name: str, entry: dict[str, Any]) -> ButlerInfo:
        spec_path = self.data_dir / "specs" / f"{name}.yaml"
        resource: ButlerResource | None = None
        try:
            resource = load_butler_file(spec_path)
        except RosterError as exc:
            log.warning("butler %s: %s", name, exc)
        log_path = entry.get("log")
        return ButlerInfo(
            name=name,
            url=str(entry["url"]),
            schema=str(entry["schema"]),
            modules=tuple(resource.spec.modules) if resource else (),
            resource=resource,
            source=f"specs/{name}.yaml",  # relative to the data directory
            log_path=Path(log_path) if log_path else None,
        )

    def dashboard_dsn(self) -> str | None:
        """The dashboard role's DSN recorded by `butlers up` (for a standalone dashboard)."""
        entry = self.state.get("dashboard") or {}
        return entry.get("dsn") or None

    def dashboard_schema(self) -> str | None:
        entry = self.state.get("dashboard") or {}
        return entry.get("schema") or None


def _pick(entry: Any, *keys: str) -> dict[str, Any]:
    return {k: entry[k] for k in keys if k in entry} if isinstance(entry, dict) else {}
