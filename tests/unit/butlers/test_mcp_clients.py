"""The one MCP client: answers in JSON or in an event stream, errors, restarted servers,
and which failed calls it repeats."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from butlers.http1 import HttpFailure, HttpResponse
from butlers.mcp_clients import (
    McpClient,
    McpError,
    OutcomeUnknown,
    ToolFailed,
    decode_result,
)

URL = "http://b/mcp"


def sse(*messages: dict[str, Any]) -> bytes:
    return b"".join(f"event: message\r\ndata: {json.dumps(m)}\r\n\r\n".encode() for m in messages)


class FakeServer:
    """Streamable HTTP as a butler answers it; `sessions` it knows (a restart forgets
    them); `fail` makes the next tools/call fail at the transport level."""

    def __init__(self) -> None:
        self.sessions: set[str] = set()
        self.requests: list[dict[str, Any]] = []
        self.fail: HttpFailure | None = None

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        if method == "DELETE":
            return HttpResponse(200, {}, b"")
        message = json.loads(body)
        session = headers.get("Mcp-Session-Id")
        self.requests.append({"body": message, "session": session})
        if message.get("method") == "initialize":
            new = f"s{len(self.sessions) + 1}"
            self.sessions.add(new)
            result = {"protocolVersion": "2025-11-25", "capabilities": {}}
            answer = sse({"jsonrpc": "2.0", "id": message["id"], "result": result})
            kind = {"content-type": "text/event-stream", "mcp-session-id": new}
            return HttpResponse(200, kind, answer)
        if session not in self.sessions:
            return HttpResponse(404, {"content-type": "application/json"}, b"{}")
        if "id" not in message:
            return HttpResponse(202, {}, b"")
        if self.fail is not None:
            failure, self.fail = self.fail, None
            raise failure
        name = message["params"].get("name")
        if name == "broken":
            error = {"code": -32602, "message": "bad"}
            body_ = json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return HttpResponse(200, {"content-type": "application/json"}, body_.encode())
        result = {
            "content": [{"type": "text", "text": "refused" if name == "refused" else '{"x": 1}'}],
            "structuredContent": {"result": {"x": 1}},
            "isError": name == "refused",
            "_meta": {"fastmcp": {"wrap_result": True}},
        }
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return HttpResponse(200, {"content-type": "text/event-stream"}, sse(note, answer))

    async def aclose(self) -> None:
        return None


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


def _client(server: FakeServer) -> McpClient:
    return McpClient({"Authorization": "Bearer t"}, http=server)


async def test_a_call_skips_notifications_and_unwraps_the_result(server: FakeServer) -> None:
    client = _client(server)
    assert (await client.call_tool(URL, "status", {})).data == {"x": 1}
    methods = [r["body"].get("method") for r in server.requests]
    assert methods == ["initialize", "notifications/initialized", "tools/call"]
    assert server.requests[-1]["session"] == "s1"
    await client.call_tool(URL, "status", {})
    assert client.opened_count == 1  # the session is kept


async def test_a_forgotten_session_is_opened_again_once(server: FakeServer) -> None:
    client = _client(server)
    await client.call_tool(URL, "status", {})
    server.sessions.clear()  # the butler restarted
    assert (await client.call_tool(URL, "status", {})).data == {"x": 1}
    assert client.opened_count == 2


async def test_a_json_rpc_error_is_a_protocol_error(server: FakeServer) -> None:
    with pytest.raises(McpError, match="bad"):
        await _client(server).call_tool(URL, "broken", {})


async def test_a_tool_error_is_raised_or_returned(server: FakeServer) -> None:
    client = _client(server)
    with pytest.raises(ToolFailed, match="refused"):
        await client.call_tool(URL, "refused", {})
    result = await client.call_tool(URL, "refused", {}, raise_on_error=False)
    assert result.is_error and result.text == "refused"


async def test_a_call_that_may_have_run_is_not_repeated(server: FakeServer) -> None:
    client = _client(server)
    await client.call_tool(URL, "status", {})
    server.fail = HttpFailure("connection reset", sent=True)
    with pytest.raises(OutcomeUnknown, match="not repeated"):
        await client.call_tool(URL, "work", {})
    assert [r["body"].get("params", {}).get("name") for r in server.requests].count("work") == 1


async def test_an_idempotent_call_or_one_never_sent_is_repeated(server: FakeServer) -> None:
    client = _client(server)
    server.fail = HttpFailure("connection reset", sent=True)
    assert (await client.call_tool(URL, "work", {}, idempotent=True)).data == {"x": 1}
    server.fail = HttpFailure("connection refused", sent=False)
    assert (await client.call_tool(URL, "work", {})).data == {"x": 1}


def test_results_without_structured_content_are_parsed_from_text() -> None:
    text = {"content": [{"type": "text", "text": "[1, 2]"}], "isError": False}
    assert decode_result(text).data == [1, 2]
    plain = {"content": [{"type": "text", "text": "hello"}], "isError": False}
    assert decode_result(plain).data == "hello"
    error = {"content": [{"type": "text", "text": "nope"}], "isError": True}
    assert (decode_result(error).is_error, decode_result(error).text) == (True, "nope")


async def test_a_call_carries_the_callers_trace_context(server: FakeServer) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("route") as span:
        await _client(server).call_tool(URL, "status", {})
    trace_id = format(span.get_span_context().trace_id, "032x")
    meta = server.requests[-1]["body"]["params"]["_meta"]
    assert meta["traceparent"].split("-")[1] == trace_id
    assert trace.get_current_span().get_span_context().is_valid is False
