"""Confirming a route with the switchboard before running what its token asks.

The switchboard's token may call `trigger` (it routes messages), so whoever holds that
token could start sessions on every butler at will. A butler therefore runs such a call
only when the switchboard confirms, over its own MCP endpoint and with this butler's own
token, that it is routing exactly this route id, to this butler, with this prompt right
now (`route_confirm`, answered from the switchboard's in-flight routes). A leaked
switchboard token alone starts nothing: a route needs a message the switchboard was given
through `ingest_v1` or `route`, by a caller with the user's token.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from butlers.core.context import ButlerContext
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed, ToolResult

log = logging.getLogger(__name__)
CONFIRM_TIMEOUT = 10.0


class RouteCheck:
    def __init__(
        self, butler: ButlerContext, switchboard_url: str | None, clients: McpClient | None = None
    ) -> None:
        self._name = butler.name
        self._switchboard = switchboard_url
        token = butler.token
        self._clients = clients or McpClient(
            {"Authorization": f"Bearer {token}"} if token else None,
            timeout=CONFIRM_TIMEOUT,
            client_name=f"butler {butler.name}",
        )

    async def refusal(self, route_id: str, prompt: str) -> str | None:
        """Why the route may not run here (None when the switchboard confirms it)."""
        if self._switchboard is None:
            return "this butler knows no switchboard to confirm routes with"
        arguments = {
            "route_id": route_id,
            "butler": self._name,
            "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(),
        }
        try:
            result = await self._confirm(arguments)
        except (EndpointUnavailable, OSError, TimeoutError) as exc:
            return f"the switchboard could not confirm route {route_id}: {exc}"
        except (ToolFailed, McpError) as exc:
            return f"the switchboard refused to confirm route {route_id}: {exc}"
        if isinstance(result.data, dict) and result.data.get("confirmed") is True:
            return None
        log.warning("refused route %s: the switchboard is not routing it here", route_id)
        return (
            f"the switchboard is not routing {route_id} to {self._name} with this prompt "
            "(a route runs only while the switchboard dispatches it)"
        )

    async def _confirm(self, arguments: dict[str, str]) -> ToolResult:
        """`route_confirm`, asked again with back-off while the switchboard cannot be
        reached, for at most CONFIRM_TIMEOUT: it has just sent this route, so it is up,
        and what fails is the way back to it (a restarted switchboard whose Service
        still points at its old pod, a kept-alive connection it dropped)."""
        assert self._switchboard is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONFIRM_TIMEOUT
        pause = 0.1
        while True:
            try:
                return await self._clients.call_tool(
                    self._switchboard, "route_confirm", arguments, idempotent=True
                )
            except (EndpointUnavailable, OSError, TimeoutError):
                if loop.time() + pause >= deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def aclose(self) -> None:
        await self._clients.close()
