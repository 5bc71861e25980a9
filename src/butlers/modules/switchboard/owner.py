"""`owner_notify` and `briefing_gather`: what butlers ask of the rest of the ecosystem.

`owner_notify` is how a butler without the messenger reaches its owner.

Every butler holds a token the switchboard verifies, and every butler accepts the
switchboard's token, so a butler's message to the owner goes through here: the caller
names itself (its own token, checked by the access rule), and the switchboard calls
the `notify` tool of the butler running the messenger module, with no recipient, so
the message goes to the owner's default channel (or the owner's channel named) and
nowhere else. The messenger's answer (its delivery row) comes back unchanged.

`briefing_gather` asks every registered butler for its morning-briefing sections
(`briefing_sections`), side by side, each within `SECTIONS_TIMEOUT`: a butler that is
down is reported with its reason and the modules it registered, never waited on.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import date
from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.jsonutil import AnyJson
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed
from butlers.modules.switchboard.inbox_store import SwitchboardStore
from butlers.spec import NAME_PATTERN
from butlers.tooling import tool

log = logging.getLogger(__name__)
MESSENGER_MODULE = "messenger"
NOTIFY_TIMEOUT = 60.0
SECTIONS_TIMEOUT = 10.0


def register_owner_tools(
    mcp: FastMCP, store: SwitchboardStore, clients: McpClient, meta: dict[str, object]
) -> None:
    own_name = meta | access_meta(sessions=False, self_arg="butler")

    @tool(mcp, meta=own_name, annotations={"readOnlyHint": True})
    async def briefing_gather(
        butler: Annotated[str, Field(pattern=NAME_PATTERN)], day: date
    ) -> AnyJson:
        """Every registered butler's morning-briefing sections for `day`, asked for
        `butler` (the caller's own name): [{butler, modules, sections} or {butler,
        modules, error}]."""
        registrations = await store.registry(SECTIONS_TIMEOUT)

        async def ask(name: str, url: str, modules: list[str]) -> dict[str, Any]:
            try:
                result = await clients.call_tool(
                    url, "briefing_sections", {"day": day.isoformat()}, timeout=SECTIONS_TIMEOUT
                )
            except (EndpointUnavailable, OSError, TimeoutError) as exc:
                return {"butler": name, "modules": modules, "error": f"unreachable: {exc}"}
            except (ToolFailed, McpError) as exc:
                return {"butler": name, "modules": modules, "error": str(exc)}
            data = result.data if isinstance(result.data, dict) else {}
            return {"butler": name, "modules": modules, "sections": data.get("sections") or []}

        answers = await asyncio.gather(
            *(ask(r.name, r.url, _names(r.modules)) for r in registrations)
        )
        log.info("gathered briefing sections of %d butlers for %s", len(answers), butler)
        return list(answers)

    @tool(mcp, meta=own_name)
    async def owner_notify(
        butler: Annotated[str, Field(pattern=NAME_PATTERN)],
        message: Annotated[str, Field(min_length=1, max_length=20000)],
        channel: Annotated[str | None, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] = None,
        subject: Annotated[str | None, Field(max_length=500)] = None,
    ) -> AnyJson:
        """Deliver `message` from `butler` (the caller's own name) to the owner through
        the messenger's `notify` (no recipient: the owner's channel). Returns the
        messenger's delivery row."""
        target = await store.url_of_module(MESSENGER_MODULE)
        if target is None:
            raise ToolError(
                "no registered butler runs the messenger module: nothing can reach the owner"
            )
        name, url = target
        arguments: dict[str, Any] = {"message": message}
        if channel:
            arguments["channel"] = channel
        if subject:
            arguments["subject"] = subject
        try:
            result = await clients.call_tool(url, "notify", arguments, timeout=NOTIFY_TIMEOUT)
        except (EndpointUnavailable, OSError, TimeoutError) as exc:
            raise ToolError(f"the messenger ({name}) could not be reached: {exc}") from None
        except (ToolFailed, McpError) as exc:
            raise ToolError(f"the messenger ({name}) refused: {exc}") from None
        data: AnyJson = result.data
        log.info("relayed a message from %s to the owner through %s", butler, name)
        return data


def _names(modules: object) -> list[str]:
    return [str(m) for m in modules] if isinstance(modules, list) else []
