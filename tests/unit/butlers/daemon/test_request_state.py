"""A butler mints no `requestState`: echoed state is refused as the SDK's default codec
refuses state it did not mint, and a tool that asks for input mid-call fails instead of
minting state (the default codec's key set-up costs every butler ~1.4 MB)."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import mcp_types

from butlers.auth.http import HostPolicy
from butlers.auth.tokens import TokenBook, digest, new_user_token
from butlers.core.context import ButlerContext
from butlers.daemon.http import build_http_app
from butlers.daemon.server import build_server, install_schema_lookup
from butlers.spec import ButlerResource
from butlers.tooling import tool
from tests.support.raw_mcp import decode
from tests.support.serving import served_asgi

TOKEN = new_user_token()
VERSION = "2026-07-28"


def _butler() -> ButlerContext:
    resource = ButlerResource.model_validate(
        {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "metadata": {"name": "probe"},
            "spec": {"description": "d", "port": 40999},
        }
    )
    butler = ButlerContext(resource=resource, schema="probe", pool=None)  # type: ignore[arg-type]
    return butler


async def _call(
    name: str, request_state: str | None = None, *, direct: bool = True
) -> dict[str, Any]:
    butler = _butler()
    mcp = build_server(butler)

    @tool(mcp)
    async def ask() -> mcp_types.InputRequiredResult:
        """Asks for nothing, but across rounds."""
        return mcp_types.InputRequiredResult(request_state="round-1")

    @tool(mcp)
    async def echo(text: str) -> str:
        """Echoes."""
        return text

    tools = await mcp.list_tools()
    butler.access.install(tools, ())
    await install_schema_lookup(mcp, tools)
    app = build_http_app(
        mcp,
        "probe",
        _ready,
        book=TokenBook(user_digests={digest(TOKEN): "user"}),
        hosts=HostPolicy(),
        direct_calls=direct,  # the direct path never answers input_required (the SDK does)
    )
    params: dict[str, Any] = {
        "name": name,
        "arguments": {"text": "hi"} if name == "echo" else {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    if request_state is not None:
        params["requestState"] = request_state
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKEN}",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    async with served_asgi(app) as base, httpx.AsyncClient(timeout=10) as http:
        response = await http.post(f"{base}/mcp", content=json.dumps(body), headers=headers)
    answer: dict[str, Any] = decode(response)
    return answer


async def _ready() -> tuple[bool, dict[str, object]]:
    return True, {}


async def test_a_plain_call_is_answered() -> None:
    answer = await _call("echo")
    assert answer["result"]["content"][0]["text"] == "hi", answer


async def test_echoed_request_state_is_refused_as_never_minted() -> None:
    answer = await _call("echo", request_state="v1.forged")
    assert answer["error"]["code"] == -32602, answer
    assert answer["error"]["message"] == "Invalid or expired requestState"


async def test_a_tool_asking_for_input_fails_instead_of_minting_state() -> None:
    answer = await _call("ask", direct=False)
    assert "result" not in answer, answer
    assert answer["error"]["code"] == -32603, answer
