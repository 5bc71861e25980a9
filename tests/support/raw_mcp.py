"""MCP over plain HTTP requests: what an attacker's script or a browser would send.

Real clients clean their input (FastMCP's turns `NaN` into `null`) and hide status
codes and headers; these helpers do neither. `RawMcpSession` opens a session with the
2025 handshake and posts raw bodies; the functions build the pieces for tests that
want to see each response.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2 as httpx

PROTOCOL_VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"


def rpc(method: str, params: dict[str, Any] | None = None, ident: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}}


def headers(
    token: str | None = None,
    session_id: str | None = None,
    *,
    version: str = PROTOCOL_VERSION,
    **extra: str,
) -> dict[str, str]:
    """A JSON POST's headers: with `token`, and in session `session_id` of `version`."""
    values = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if token:
        values["Authorization"] = f"Bearer {token}"
    if session_id:
        values["Mcp-Session-Id"] = session_id
        values["MCP-Protocol-Version"] = version
    return values | extra


def decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether plain JSON or one SSE event."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        # SSE ends lines with CR and/or LF only (`str.splitlines` also splits at U+2028).
        lines = re.split(r"\r\n|\r|\n", text)
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        text = data[-1] if data else "{}"
    return dict(json.loads(text or "{}"))


async def open_session(
    http: httpx.AsyncClient, url: str, token: str | None, version: str = PROTOCOL_VERSION
) -> str:
    """initialize + initialized with `token`, asking for `version`; the new session's id."""
    init = rpc(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    )
    response = await http.post(url, json=init, headers=headers(token))
    response.raise_for_status()
    session_id = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await http.post(url, json=note, headers=headers(token, session_id, version=version))
    done.raise_for_status()
    return session_id


class RawMcpSession:
    """One MCP session over `client` (which carries any token in its own headers)."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self._client = client
        self.session_id: str | None = None
        self._ids = 0

    async def open(self) -> None:
        self.session_id = await open_session(self._client, self.url, None)

    async def call_tool(
        self, name: str, arguments_json: str, meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """`tools/call` with the arguments exactly as written (and `_meta`, such as a
        progress token, which sends the call to the SDK's path); the JSON-RPC answer."""
        self._ids += 1
        extra = f', "_meta": {json.dumps(meta)}' if meta else ""
        body = (
            f'{{"jsonrpc": "2.0", "id": {self._ids}, "method": "tools/call", '
            f'"params": {{"name": {json.dumps(name)}, "arguments": {arguments_json}{extra}}}}}'
        )
        response = await self._client.post(
            self.url, content=body.encode(), headers=headers(None, self.session_id)
        )
        return decode(response)
