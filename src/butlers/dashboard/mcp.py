"""`ButlerClients`: the dashboard's MCP clients, one long-lived client per butler.

Every write of the dashboard is a tool call on the owning butler. Clients send
the ecosystem's user bearer token when there is one (the `token` of
`ecosystem.json`, or `BUTLERS_DASHBOARD_MCP_TOKEN`), so the same code works
before and after butlers require tokens. A butler that cannot be reached is
`BUTLER_UNREACHABLE` (502); a tool that ran and failed is `TOOL_ERROR`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
from mcp.shared.exceptions import MCPError

from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.errors import ButlerUnreachable, ToolFailed
from butlers.mcp_clients import CONNECTION_CLOSED, ClientCache, EndpointUnavailable

log = logging.getLogger(__name__)
DEFAULT_CALL_TIMEOUT = 60.0
TRANSPORT_ERRORS = (httpx.HTTPError, OSError, RuntimeError, MCPError, EndpointUnavailable)


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's answer: its value (decoded JSON when possible) and its text."""

    data: Any
    text: str
    is_error: bool


def decode_result(result: Any) -> ToolOutcome:
    text = "\n".join(getattr(block, "text", "") for block in (result.content or []))
    if result.is_error:
        return ToolOutcome(None, text, True)
    if result.structured_content is not None:
        data = result.data if result.data is not None else result.structured_content
        if isinstance(data, dict) and set(data) == {"result"} and result.data is None:
            data = data["result"]
        return ToolOutcome(_plain(data), text, False)
    try:
        return ToolOutcome(json.loads(text), text, False)
    except ValueError:
        return ToolOutcome(text, text, False)


def _plain(value: Any) -> Any:
    """FastMCP may hand back dataclass-like objects; the API wants plain JSON."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__"):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


class ButlerClients:
    def __init__(
        self, token: Callable[[], str | None], *, timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> None:
        self._token_source = token
        self._timeout = timeout
        self._token: str | None = None
        self._cache: ClientCache | None = None

    async def _clients(self) -> ClientCache:
        token = self._token_source()
        if self._cache is None or token != self._token:
            old, self._cache = self._cache, None
            if old is not None:
                await old.close()
            headers = {"Authorization": f"Bearer {token}"} if token else None
            self._cache = ClientCache(timeout=self._timeout, headers=headers)
            self._token = token
        return self._cache

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
        cache = await self._clients()
        kwargs: dict[str, Any] = {"raise_on_error": False}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            result = await cache.call_tool(butler.url, tool, arguments or {}, **kwargs)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                raise self._unreachable(butler, exc) from exc
            return ToolOutcome(None, exc.error.message, True)  # a protocol-level refusal
        except TRANSPORT_ERRORS as exc:
            raise self._unreachable(butler, exc) from exc
        return decode_result(result)

    async def list_tools(self, butler: ButlerInfo) -> list[Any]:
        cache = await self._clients()
        for attempt in (1, 2):
            try:
                client = await cache.get(butler.url)
                return list(await client.list_tools())
            except TRANSPORT_ERRORS as exc:
                await cache.drop(butler.url)
                if attempt == 2:
                    raise self._unreachable(butler, exc) from exc
        raise AssertionError("unreachable")

    @staticmethod
    def _unreachable(butler: ButlerInfo, exc: BaseException) -> ButlerUnreachable:
        reason = str(exc).strip() or exc.__class__.__name__
        return ButlerUnreachable(
            f"butler {butler.name!r} cannot be reached at {butler.url}: {reason}",
            butler=butler.name,
        )

    async def close(self) -> None:
        if self._cache is not None:
            await self._cache.close()
            self._cache = None
