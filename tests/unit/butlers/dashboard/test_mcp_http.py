"""The lean MCP client: answers in JSON or in an event stream, errors, restarted servers."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import pytest

from butlers.dashboard.mcp import decode_result
from butlers.dashboard.mcp_http import McpHttpClient, McpProtocolError


def sse(*messages: dict[str, Any]) -> bytes:
    return b"".join(f"event: message\ndata: {json.dumps(m)}\n\n".encode() for m in messages)


class FakeServer:
    """Streamable HTTP as FastMCP answers it; `sessions` it knows (a restart forgets them)."""

    def __init__(self) -> None:
        self.sessions: set[str] = set()
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(200)
        body = json.loads(request.read())
        self.requests.append({"body": body, "session": request.headers.get("mcp-session-id")})
        method = body.get("method")
        if method == "initialize":
            session = f"s{len(self.sessions) + 1}"
            self.sessions.add(session)
            result = {"protocolVersion": "2025-06-18", "capabilities": {}}
            return httpx.Response(
                200,
                content=sse({"jsonrpc": "2.0", "id": body["id"], "result": result}),
                headers={"content-type": "text/event-stream", "mcp-session-id": session},
            )
        if request.headers.get("mcp-session-id") not in self.sessions:
            return httpx.Response(404, json={"error": "unknown session"})
        if "id" not in body:
            return httpx.Response(202)
        if body["params"].get("name") == "broken":
            return httpx.Response(
                200,
                json={
                    "jsonrpc": "2.0",
                    "id": body["id"],
                    "error": {"code": -32602, "message": "bad"},
                },
            )
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
        answer = {
            "jsonrpc": "2.0",
            "id": body["id"],
            "result": {
                "content": [{"type": "text", "text": '{"x": 1}'}],
                "structuredContent": {"result": {"x": 1}},
                "isError": False,
                "_meta": {"fastmcp": {"wrap_result": True}},
            },
        }
        return httpx.Response(
            200, content=sse(note, answer), headers={"content-type": "text/event-stream"}
        )


@pytest.fixture
def server_and_client(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeServer, McpHttpClient]:
    server = FakeServer()
    client = McpHttpClient({"Authorization": "Bearer t"})
    client._http = httpx.AsyncClient(transport=httpx.MockTransport(server))
    return server, client


async def test_a_call_skips_notifications_and_unwraps_the_result(
    server_and_client: tuple[FakeServer, McpHttpClient],
) -> None:
    server, client = server_and_client
    result = await client.call_tool("http://b/mcp", "status", {})
    assert decode_result(result).data == {"x": 1}
    methods = [r["body"].get("method") for r in server.requests]
    assert methods == ["initialize", "notifications/initialized", "tools/call"]
    assert server.requests[-1]["session"] == "s1"
    await client.aclose()


async def test_a_forgotten_session_is_opened_again_once(
    server_and_client: tuple[FakeServer, McpHttpClient],
) -> None:
    server, client = server_and_client
    await client.call_tool("http://b/mcp", "status", {})
    server.sessions.clear()  # the butler restarted
    await client.call_tool("http://b/mcp", "status", {})
    assert [r["body"].get("method") for r in server.requests].count("initialize") == 2
    await client.aclose()


async def test_a_json_rpc_error_is_a_protocol_error(
    server_and_client: tuple[FakeServer, McpHttpClient],
) -> None:
    _server, client = server_and_client
    with pytest.raises(McpProtocolError, match="bad"):
        await client.call_tool("http://b/mcp", "broken", {})
    await client.aclose()


def test_results_without_structured_content_are_parsed_from_text() -> None:
    text = {"content": [{"type": "text", "text": "[1, 2]"}], "isError": False}
    assert decode_result(text).data == [1, 2]
    plain = {"content": [{"type": "text", "text": "hello"}], "isError": False}
    assert decode_result(plain).data == "hello"
    error = {"content": [{"type": "text", "text": "nope"}], "isError": True}
    assert (decode_result(error).is_error, decode_result(error).text) == (True, "nope")
