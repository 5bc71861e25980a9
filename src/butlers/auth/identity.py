"""Who a caller is, as the rest of the butler sees it.

Over HTTP the identity comes from the bearer token (`auth.http`); in this process,
from `current_identity`, which the session toolbox sets around its calls to the server
(and the direct `tools/call` path around each call it answers). Code of the butler
itself calling its own server in memory is `LOCAL`.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Literal

Kind = Literal["user", "butler", "session", "local"]


@dataclass(frozen=True)
class Identity:
    kind: Kind
    name: str
    # A butler identity accepted as this ecosystem's switchboard (may route: `trigger`).
    router: bool = False
    # A session identity that may call no tool at all (the classifier's).
    tools: bool = True

    @property
    def label(self) -> str:
        """How logs and audit columns name the caller: `user`, `user:dashboard`,
        `butler:health`, `session:<id>`, `local`."""
        if self.kind == "local":
            return "local"
        if self.kind == "user" and self.name == "user":
            return "user"
        return f"{self.kind}:{self.name}"

    @property
    def is_user(self) -> bool:
        """The user's authority (a user token, or the butler's own in-process code)."""
        return self.kind in ("user", "local")


LOCAL = Identity("local", "local")


def user(label: str = "user") -> Identity:
    return Identity("user", label)


def butler(name: str, *, router: bool = False) -> Identity:
    return Identity("butler", name, router=router)


def session(session_id: str, *, tools: bool = True) -> Identity:
    return Identity("session", session_id, tools=tools)


current_identity: contextvars.ContextVar[Identity] = contextvars.ContextVar(
    "butlers_identity", default=LOCAL
)

current_mcp_session: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "butlers_mcp_session", default=None
)
"""The MCP session of a call answered by the daemon's direct `tools/call` path (for
the audit trail); the SDK's own path carries it in FastMCP's request context."""
