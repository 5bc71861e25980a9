"""A bare MCP client over streamable HTTP: sends the JSON-RPC text it is given.

Real clients clean their input (FastMCP's turns `NaN` into `null`); an attacker's
need not. This one opens a session with the 2025 handshake and posts raw bodies.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx

PROTOCOL = "2025-06-18"
ACCEPT = "application/json, text/event-stream"


class RawMcpSession:
    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self._client = client
        self.session_id: str | None = None
        self._ids = 0

    async def open(self) -> None:
        response = await self.post_json(
            {
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        await self.post_text('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    async def post_json(self, message: dict[str, Any]) -> httpx.Response:
        self._ids += 1
        return await self.post_text(json.dumps({"jsonrpc": "2.0", "id": self._ids, **message}))

    async def post_text(self, body: str) -> httpx.Response:
        headers = {"content-type": "application/json", "accept": ACCEPT}
        if self.session_id:
            headers |= {"mcp-session-id": self.session_id, "mcp-protocol-version": PROTOCOL}
        return await self._client.post(self.url, content=body.encode(), headers=headers)

    async def call_tool(self, name: str, arguments_json: str) -> dict[str, Any]:
        """`tools/call` with the arguments exactly as written; the JSON-RPC answer."""
        self._ids += 1
        body = (
            f'{{"jsonrpc": "2.0", "id": {self._ids}, "method": "tools/call", '
            f'"params": {{"name": {json.dumps(name)}, "arguments": {arguments_json}}}}}'
        )
        return answer(await self.post_text(body))


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether plain JSON or one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return dict(json.loads(line[5:]))
        raise AssertionError(f"no event in {response.text!r}")
    return dict(response.json())
