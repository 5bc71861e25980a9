"""`ButlerClients`: the dashboard's MCP access to every butler, over one HTTP client.

Every write of the dashboard is a tool call on the owning butler. Requests carry
the ecosystem's user bearer token when there is one (the `token` of
`ecosystem.json`, or `BUTLERS_DASHBOARD_MCP_TOKEN`), so the same code works before
and after butlers require tokens. A butler that cannot be reached is
`BUTLER_UNREACHABLE` (502); a tool that ran and failed is `TOOL_ERROR`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.errors import ButlerUnreachable, ToolFailed
from butlers.dashboard.mcp_http import McpHttpClient, McpProtocolError, McpTransportError

log = logging.getLogger(__name__)
DEFAULT_CALL_TIMEOUT = 60.0


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's answer: its value (decoded JSON when possible) and its text."""

    data: Any
    text: str
    is_error: bool


def decode_result(result: dict[str, Any]) -> ToolOutcome:
    """A `tools/call` result: structured content (unwrapped as FastMCP wraps it), else the
    text parsed as JSON, else the text."""
    text = "\n".join(str(block.get("text", "")) for block in result.get("content") or [] if block)
    if result.get("isError"):
        return ToolOutcome(None, text, True)
    structured = result.get("structuredContent")
    if structured is not None:
        wrapped = ((result.get("_meta") or {}).get("fastmcp") or {}).get("wrap_result")
        if wrapped and isinstance(structured, dict) and "result" in structured:
            structured = structured["result"]
        return ToolOutcome(structured, text, False)
    try:
        return ToolOutcome(json.loads(text), text, False)
    except ValueError:
        return ToolOutcome(text, text, False)


class ButlerClients:
    def __init__(
        self, token: Callable[[], str | None], *, timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> None:
        self._token_source = token
        self._timeout = timeout
        self._token: str | None = None
        self._client: McpHttpClient | None = None

    async def _http(self) -> McpHttpClient:
        token = self._token_source()
        if self._client is None or token != self._token:
            old, self._client = self._client, None
            if old is not None:
                await old.aclose()
            headers = {"Authorization": f"Bearer {token}"} if token else None
            self._client = McpHttpClient(headers)
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
            result = await client.call_tool(
                butler.url, tool, arguments or {}, timeout or self._timeout
            )
        except McpProtocolError as exc:
            return ToolOutcome(None, exc.message, True)  # e.g. an unknown tool
        except McpTransportError as exc:
            raise self._unreachable(butler, exc) from exc
        return decode_result(result)

    async def list_tools(self, butler: ButlerInfo) -> list[dict[str, Any]]:
        """`tools/list` of the butler: dicts with name, description, inputSchema, _meta…"""
        client = await self._http()
        try:
            return await client.list_tools(butler.url)
        except (McpTransportError, McpProtocolError) as exc:
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
