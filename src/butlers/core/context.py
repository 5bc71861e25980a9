"""What a running butler knows about itself; handed to every tool registrar and module."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from butlers.auth.middleware import AccessMiddleware
from butlers.auth.tokens import TokenBook
from butlers.core.secrets import SecretResolver
from butlers.settings import GOOGLE_TOKEN_URL
from butlers.spec import ButlerResource
from butlers.stores.starts import StartRecord


@dataclass
class ModuleState:
    """Start-up outcome of one module, as `status` reports it."""

    name: str
    status: str  # "active" | "failed" | "cascade_failed" | "disabled"
    phase: str | None = None  # where it failed: "config", "credentials", "startup", ...
    error: str | None = None
    # The owner's runtime override ("disabled"): who switched it off, when (ISO 8601).
    disabled_by: str | None = None
    disabled_at: str | None = None
    # Why the owner may not switch it off at runtime (a required module), if so.
    required: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "phase": self.phase,
            "error": self.error,
            "source": "runtime" if self.status == "disabled" else "spec",
            "disabled_by": self.disabled_by,
            "disabled_at": self.disabled_at,
            "required": self.required,
        }


@dataclass
class ButlerContext:
    """One butler in this process: its resource, schema, pool, modules and environment.

    Named apart from the LLM session runtimes (`butlers.llm`): this is the butler itself.
    """

    resource: ButlerResource
    schema: str
    pool: asyncpg.Pool
    started_at: float = field(default_factory=time.monotonic)
    # This process's start as recorded in `butler_starts` (None until `Butler.start`).
    start: StartRecord | None = None
    modules: list[ModuleState] = field(default_factory=list)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    approval_timeout_seconds: float | None = None  # overrides spec.approvals.timeout_seconds
    # The spawner's activity (`{"running": bool, "queued": int}`), once it exists.
    session_activity: Callable[[], dict[str, Any]] | None = None
    # Who may call what: the tokens this butler accepts (and the session tokens it
    # mints), the access rule over its tools, and its own token for calling others.
    tokens: TokenBook = field(default_factory=TokenBook, repr=False)
    access: AccessMiddleware = field(default_factory=AccessMiddleware, repr=False)
    token: str | None = field(default=None, repr=False)
    # Credentials: the secrets stores, then the environment (None: the environment only).
    secrets: SecretResolver | None = field(default=None, repr=False)
    # Google's token endpoint (BUTLERS_GOOGLE_TOKEN_URL), for modules using the OAuth grant.
    google_token_url: str = GOOGLE_TOKEN_URL

    @property
    def name(self) -> str:
        return self.resource.name

    @property
    def uptime_seconds(self) -> float:
        return time.monotonic() - self.started_at
