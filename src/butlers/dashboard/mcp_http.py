"""A lean MCP client over streamable HTTP: initialize, `tools/list`, `tools/call`.

The dashboard needs three requests of the protocol; the MCP SDK's types alone
cost ~60 MB of memory and seconds of imports, so it speaks JSON-RPC directly:
POST `/mcp` with `Accept: application/json, text/event-stream`, keep the
`Mcp-Session-Id` the server assigns, read the answer as JSON or from the event
stream. A session the server forgot (the butler restarted: 404) is opened again
once. One HTTP client with keep-alive serves every butler.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from typing import Any

import httpx2 as httpx

PROTOCOL_VERSION = "2025-06-18"
CONNECT_TIMEOUT = 5.0
DEFAULT_TIMEOUT = 60.0


class McpTransportError(ConnectionError):
    """The server could not be reached or answered outside the protocol."""


class McpProtocolError(Exception):
    """A JSON-RPC error answer (the request reached the server and was refused)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message


class McpHttpClient:
    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self._headers = dict(headers or {})
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(DEFAULT_TIMEOUT, connect=CONNECT_TIMEOUT)
        )
        self._sessions: dict[str, tuple[str | None, str]] = {}  # url → (session id, version)
        self._locks: dict[str, asyncio.Lock] = {}
        self._ids = itertools.count(1)

    async def list_tools(self, url: str) -> list[dict[str, Any]]:
        result = await self.request(url, "tools/list", {})
        return list(result.get("tools") or [])

    async def call_tool(
        self, url: str, name: str, arguments: Mapping[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        return await self.request(
            url, "tools/call", {"name": name, "arguments": dict(arguments)}, timeout
        )

    async def request(
        self, url: str, method: str, params: Mapping[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        for attempt in (1, 2):
            session = await self._session(url)
            try:
                result, _session_id = await self._post(url, method, params, session, timeout)
                return result
            except _SessionGone:
                self._sessions.pop(url, None)
                if attempt == 2:
                    raise McpTransportError(
                        f"{url}: the server keeps refusing the session"
                    ) from None
        raise AssertionError("unreachable")

    async def _session(self, url: str) -> tuple[str | None, str]:
        known = self._sessions.get(url)
        if known is not None:
            return known
        async with self._locks.setdefault(url, asyncio.Lock()):
            known = self._sessions.get(url)
            if known is None:
                params = {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "butlers-dashboard", "version": "1"},
                }
                result, session_id = await self._post(url, "initialize", params, None, None)
                known = (session_id, str(result.get("protocolVersion") or PROTOCOL_VERSION))
                await self._notify(url, "notifications/initialized", known)
                self._sessions[url] = known
            return known

    def _request_headers(self, session: tuple[str | None, str] | None) -> dict[str, str]:
        headers = {
            **self._headers,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if session is not None:
            if session[0]:
                headers["Mcp-Session-Id"] = session[0]
            headers["Mcp-Protocol-Version"] = session[1]
        return headers

    async def _notify(self, url: str, method: str, session: tuple[str | None, str]) -> None:
        body = {"jsonrpc": "2.0", "method": method}
        try:
            response = await self._http.post(url, json=body, headers=self._request_headers(session))
        except httpx.HTTPError as exc:
            raise McpTransportError(f"{url}: {exc.__class__.__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise McpTransportError(f"{url} refused {method}: HTTP {response.status_code}")

    async def _post(
        self,
        url: str,
        method: str,
        params: Mapping[str, Any],
        session: tuple[str | None, str] | None,
        timeout: float | None,
    ) -> tuple[dict[str, Any], str | None]:
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}
        limits = httpx.Timeout(timeout or DEFAULT_TIMEOUT, connect=CONNECT_TIMEOUT)
        try:
            async with self._http.stream(
                "POST", url, json=body, headers=self._request_headers(session), timeout=limits
            ) as response:
                if response.status_code == 404 and session is not None:
                    raise _SessionGone
                if response.status_code >= 400:
                    text = (await response.aread()).decode(errors="replace")[:300]
                    raise McpTransportError(
                        f"{url} answered HTTP {response.status_code} to {method}: {text}"
                    )
                answer = await _read_answer(response, request_id)
                session_id = response.headers.get("mcp-session-id")
        except httpx.HTTPError as exc:
            raise McpTransportError(f"{url}: {exc.__class__.__name__}: {exc}") from exc
        if "error" in answer:
            error = answer["error"] or {}
            raise McpProtocolError(int(error.get("code", 0)), str(error.get("message", "")))
        return dict(answer.get("result") or {}), session_id

    async def aclose(self) -> None:
        for url, (session_id, version) in list(self._sessions.items()):
            if session_id:
                try:
                    await self._http.delete(
                        url, headers=self._request_headers((session_id, version)), timeout=2
                    )
                except httpx.HTTPError:
                    pass
        self._sessions.clear()
        await self._http.aclose()


class _SessionGone(Exception):
    """The server no longer knows the session (it restarted)."""


async def _read_answer(response: httpx.Response, request_id: int) -> dict[str, Any]:
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        message = json.loads(await response.aread())
        return _match(message, request_id) or {}
    if not kind.startswith("text/event-stream"):
        raise McpTransportError(f"unexpected content type {kind!r}")
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            found = _match(json.loads("\n".join(data)), request_id)
            data = []
            if found is not None:
                return found
    raise McpTransportError("the event stream ended without an answer")


def _match(message: Any, request_id: int) -> dict[str, Any] | None:
    """The answer to `request_id` in a message (or batch); notifications are skipped."""
    for item in message if isinstance(message, list) else [message]:
        if isinstance(item, dict) and item.get("id") == request_id:
            return item
    return None
