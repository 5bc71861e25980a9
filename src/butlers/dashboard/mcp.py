"""`ButlerClients`: the dashboard's MCP access to every butler, over the one MCP client
of butlers (`butlers.mcp_clients`, which imports neither the MCP SDK nor FastMCP).

Every write of the dashboard is a tool call on the owning butler. Requests carry
the ecosystem's user bearer token when there is one (the `token` of
`ecosystem.json`, or `BUTLERS_DASHBOARD_MCP_TOKEN`), so the same code works before
and after butlers require tokens. A butler that cannot be reached is
`BUTLER_UNREACHABLE` (502); a tool that ran and failed is `TOOL_ERROR`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.errors import ButlerUnreachable, ToolFailed
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolResult

log = logging.getLogger(__name__)
DEFAULT_CALL_TIMEOUT = 60.0
ToolOutcome = ToolResult  # a tool's answer: `data` (decoded JSON when possible), `text`


class ButlerClients:
    def __init__(
        self, token: Callable[[], str | None], *, timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> None:
        self._token_source = token
        self._timeout = timeout
        self._token: str | None = None
        self._client: McpClient | None = None

    async def _http(self) -> McpClient:
        token = self._token_source()
        if self._client is None or token != self._token:
            old, self._client = self._client, None
            if old is not None:
                await old.aclose()
            headers = {"Authorization": f"Bearer {token}"} if token else None
            self._client = McpClient(
                headers, timeout=self._timeout, client_name="butlers-dashboard"
            )
            self._token = token
        return self._client

    async def call(
        self,
        butler: ButlerInfo,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolOutcome:
        """Call a tool; tool failures raise `ToolFailed`, transport ones `ButlerUnreachable`."""
        outcome = await self.call_raw(butler, tool, arguments, timeout=timeout)
        if outcome.is_error:
            raise ToolFailed(
                f"{butler.name}.{tool}: {outcome.text or 'the tool failed'}", butler=butler.name
            )
        return outcome

    async def call_raw(
        self,
        butler: ButlerInfo,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolOutcome:
        """Call a tool; a tool error is returned (`is_error`), not raised."""
        client = await self._http()
        try:
            return await client.call_tool(
                butler.url,
                tool,
                arguments or {},
                timeout=timeout or self._timeout,
                raise_on_error=False,
            )
        except McpError as exc:
            return ToolResult(None, exc.message, True, {})  # e.g. an unknown tool
        except EndpointUnavailable as exc:
            raise self._unreachable(butler, exc) from exc

    def opened_session(self, session_id: str) -> bool:
        """Whether this dashboard opened the MCP session `session_id` (recently)."""
        return self._client is not None and session_id in self._client.opened_sessions

    async def list_tools(self, butler: ButlerInfo) -> list[dict[str, Any]]:
        """`tools/list` of the butler: dicts with name, description, inputSchema, _meta…"""
        client = await self._http()
        try:
            return await client.list_tools(butler.url)
        except (EndpointUnavailable, McpError) as exc:
            raise self._unreachable(butler, exc) from exc

    @staticmethod
    def _unreachable(butler: ButlerInfo, exc: BaseException) -> ButlerUnreachable:
        reason = str(exc).strip() or exc.__class__.__name__
        return ButlerUnreachable(
            f"butler {butler.name!r} cannot be reached at {butler.url}: {reason}",
            butler=butler.name,
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
