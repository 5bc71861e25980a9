"""Who may call which tool: declared per tool in its `meta`, decided by one rule.

A tool's meta may carry:

- `"sessions": False`: no LLM session may call it. A session reads untrusted text,
  so it never holds a tool that changes who may do what (approval decisions,
  schedules and jobs, the registry, history) or that starts sessions itself.
- `"router": True`: the switchboard may call it (`trigger`, to route a message; the
  tool itself asks it for a route key, see `tools.spawn`).
- `"self_arg": "<argument>"`: another butler may call it for its own name only (the
  argument must equal the caller's name): `butler_register`, `butler_heartbeat`.
- `"user": False`: not even the user token may call it (only a butler for its own
  name: nobody else may move or keep alive a butler's route).
- `"connector": True`: any butler's own token may call it (a channel connector on the
  messenger hands a received message to `ingest_v1`; its key is scoped to that caller).
- `"operator": True`: the owner's view of the butler (its status, its session log, its
  schedules, counters): nothing a session needs to do its work, so no session is
  offered it or may call it (every tool a session lists costs tokens on every request).

The user's token (and the butler's own code, in process) may call everything else;
a butler's token nothing else; a session everything not closed to sessions and not an
operator's tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from butlers.auth.identity import Identity

SESSIONS = "sessions"
ROUTER = "router"
SELF_ARG = "self_arg"
USER = "user"
CONNECTOR = "connector"
OPERATOR = "operator"


def access_meta(
    *,
    sessions: bool = True,
    router: bool = False,
    self_arg: str | None = None,
    user: bool = True,
    connector: bool = False,
    operator: bool = False,
) -> dict[str, Any]:
    """The meta entries of a tool's access declaration (only what differs from the
    default: open to the user and to sessions, closed to other butlers)."""
    meta: dict[str, Any] = {}
    if not sessions:
        meta[SESSIONS] = False
    if router:
        meta[ROUTER] = True
    if self_arg:
        meta[SELF_ARG] = self_arg
    if not user:
        meta[USER] = False
    if connector:
        meta[CONNECTOR] = True
    if operator:
        meta[OPERATOR] = True
    return meta


def refusal(
    identity: Identity, tool: str, meta: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str | None:
    """Why `identity` may not call `tool` with `arguments`, or None when it may."""
    self_arg = meta.get(SELF_ARG)
    if identity.kind in ("user", "local"):
        if meta.get(USER, True) or identity.kind == "local":
            return None
        return (
            f"{tool} can only be called by the butler named in {self_arg!r}, with its own "
            "token; not even the user's token may call it"
        )
    if identity.kind == "session":
        if not identity.tools:
            return f"this session may not call any tool (asked for {tool})"
        if meta.get(OPERATOR):
            return (
                f"{tool} is an operator's tool (the owner reads it on the dashboard or with "
                "the user token); LLM sessions are not offered it"
            )
        if meta.get(SESSIONS, True):
            return None
        return (
            f"{tool} is not available to an LLM session: it changes who may do what "
            "(a person decides that with the user's token)"
        )
    if meta.get(ROUTER) and identity.router:
        return None
    if meta.get(CONNECTOR) and identity.kind == "butler":
        return None
    if self_arg and arguments.get(self_arg) == identity.name:
        return None
    if self_arg:
        return (
            f"{identity.label} may call {tool} only for itself "
            f"({self_arg}={identity.name!r}, not {arguments.get(self_arg)!r})"
        )
    return f"{identity.label} may not call {tool}"


def may_list(identity: Identity, meta: Mapping[str, Any]) -> bool:
    """Whether `identity` sees the tool in `tools/list` (could call it at all)."""
    if identity.kind in ("user", "local"):
        return True  # the owner sees the whole surface, even what only a butler may call
    if identity.kind == "session":
        return identity.tools and session_may_call(meta)
    if meta.get(CONNECTOR) and identity.kind == "butler":
        return True
    return bool(meta.get(ROUTER) and identity.router) or bool(meta.get(SELF_ARG))


def session_may_call(meta: Mapping[str, Any]) -> bool:
    """Whether an LLM session (one that holds tools) may see and call a tool so declared."""
    return bool(meta.get(SESSIONS, True)) and not meta.get(OPERATOR)
