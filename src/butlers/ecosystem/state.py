"""`<data-dir>/ecosystem.json`: what a running local ecosystem tells other processes.

One model for the writer (the supervisor of `butlers up`) and every reader
(`up --detach` waiting for it, `status`, `send`, the endpoint table the CLI
prints). The file is written atomically with mode 0600: it holds DSNs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from butlers.errors import EcosystemError

FILE_NAME = "ecosystem.json"


class StateModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class DatabaseInfo(StateModel):
    kind: Literal["embedded", "external"]
    host: str | None = None
    port: int
    database: str
    data_dir: str | None = None  # embedded only
    admin_dsn: str | None = None  # embedded only (a local, generated superuser)
    url: str | None = None  # external only, password masked


class ButlerInfo(StateModel):
    url: str
    sse_url: str
    port: int
    schema_name: str = Field(alias="schema")
    role: str
    dsn: str
    pid: int | None = None
    log: str

    @property
    def base_url(self) -> str:
        return self.url.removesuffix("/mcp")


class DashboardInfo(StateModel):
    url: str | None = None  # None: not running
    port: int | None = None
    schema_name: str = Field(alias="schema")
    role: str
    dsn: str
    pid: int | None = None
    log: str


class EcosystemState(StateModel):
    # The user's token (full access to every butler): `butlers send`, outside clients
    # and the dashboard read it here; the file is 0600.
    token: str | None = None
    database: DatabaseInfo
    butlers: dict[str, ButlerInfo]
    switchboard: str | None = None  # its MCP URL, when the roster has one
    dashboard: DashboardInfo | None = None  # None: started with --no-dashboard
    supervisor_pid: int
    schema_prefix: str
    # False while the dashboard takes its first look (it reads this file to find the
    # butlers); `up --detach` returns once it is true.
    ready: bool = True

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=2)

    def write(self, data_dir: Path) -> None:
        """Replace the state file atomically (readers never see half a file)."""
        path = state_path(data_dir)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # Created 0600: the file holds the user's token, never readable by others.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(self.to_json())
        tmp.replace(path)


def state_path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def read_state(data_dir: Path) -> EcosystemState | None:
    """The state file of `data_dir`, or None when there is none."""
    path = state_path(data_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return EcosystemState.model_validate_json(text)
    except ValidationError as exc:
        raise EcosystemError(
            f"{path} is not an ecosystem state file ({exc.error_count()} problems, first: "
            f"{exc.errors()[0]['msg']}); stop that ecosystem or remove the file"
        ) from None
