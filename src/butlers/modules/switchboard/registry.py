"""The switchboard's registry tools: where each butler is, and what it is for.

Whatever a butler registers goes into every classification prompt and decides where
messages go, so: only the butler itself may register, heartbeat or move its own name
(its own token, checked by the access rule; not even the user's token may), every
field is bounded, a butler (or the user) can deregister, and entries whose heartbeat
stopped longer than `registryExpirySeconds` ago are removed by a periodic sweep.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.jsonutil import AnyJson
from butlers.modules.switchboard.inbox_store import SwitchboardStore
from butlers.spec import NAME_PATTERN
from butlers.tooling import tool

log = logging.getLogger(__name__)
# The same bounds as a Butler spec's description and routing hints.
DESCRIPTION_MAX = 2000
HINT_MAX = 512
HINTS_MAX = 32
MODULES_MAX = 64
URL_MAX = 2048

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Description = Annotated[str, Field(min_length=1, max_length=DESCRIPTION_MAX)]
Url = Annotated[str, Field(pattern=r"^https?://[^\s]+$", max_length=URL_MAX)]
Hints = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=HINT_MAX)]], Field(max_length=HINTS_MAX)
]
Modules = Annotated[
    list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]], Field(max_length=MODULES_MAX)
]


def register_registry_tools(mcp: FastMCP, store: SwitchboardStore, meta: dict[str, object]) -> None:
    own_name = meta | access_meta(sessions=False, self_arg="name", user=False)

    @tool(mcp, meta=own_name)
    async def butler_register(
        name: Name,
        description: Description,
        url: Url,
        hints: Hints | None = None,
        modules: Modules | None = None,
    ) -> AnyJson:
        """Register (or re-register) a butler and its MCP URL for routing. Only the butler
        itself, with its own token, may register its name."""
        await store.register(name, description, url, hints or [], modules or [])
        log.info("registered butler %s at %s", name, url)
        return {"registered": name, "url": url}

    @tool(mcp, meta=own_name)
    async def butler_heartbeat(name: Name) -> AnyJson:
        """Mark a registered butler alive; `known` is false when it must register again."""
        return {"name": name, "known": await store.heartbeat(name)}

    @tool(mcp, meta=meta | access_meta(sessions=False, self_arg="name"))
    async def butler_deregister(name: Name) -> AnyJson:
        """Remove a butler from routing (the butler itself, or the user's token). A butler
        still running registers again with its next heartbeat."""
        deregistered = await store.deregister(name)
        if deregistered:
            log.info("deregistered butler %s", name)
        return {"name": name, "deregistered": deregistered}


async def expire_stale_entries(store: SwitchboardStore, expiry_seconds: float) -> None:
    """Forever: remove entries whose last heartbeat is older than `expiry_seconds`."""
    interval = min(60.0, max(0.5, expiry_seconds / 4))
    while True:
        try:
            for name in await store.expire_registrations(expiry_seconds):
                log.warning(
                    "butler %s expired from the registry: no heartbeat for %.0f s",
                    name,
                    expiry_seconds,
                )
        except Exception as exc:  # the database may be down: try again next round
            log.warning("registry expiry sweep failed: %s: %s", exc.__class__.__name__, exc)
        await asyncio.sleep(interval)
