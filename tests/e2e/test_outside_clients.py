"""`/mcp` and `/sse` stay standard MCP endpoints: clients other than ours connect with
the user's token in an `Authorization` header, as the README tells users to."""

from __future__ import annotations

import asyncio

import httpx2 as httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.inspector import inspector_cli, run_inspector

from .harness.ecosystem import EcosystemHandle


async def test_the_official_sdk_client_lists_and_calls_tools_with_the_token(
    butler_ecosystem: EcosystemHandle,
) -> None:
    eco = butler_ecosystem
    headers = {"Authorization": f"Bearer {eco.token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(eco["health"].url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        result = await session.call_tool("status", {})
    assert {"status", "state_get", "measurement_log"} <= tools
    assert not result.is_error


@pytest.fixture(scope="module")
def inspector() -> object:
    executable, reason = inspector_cli()
    if executable is None:
        pytest.skip(reason or "the MCP Inspector is not available")
    return executable


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_mcp_inspector_cli_connects_with_the_token(
    butler_ecosystem: EcosystemHandle, inspector: object, transport: str
) -> None:
    eco = butler_ecosystem
    endpoint = eco["general"]
    url = endpoint.url if transport == "http" else endpoint.sse_url
    args = ["--transport", transport, "--method", "tools/list"]
    code, listed = await asyncio.to_thread(run_inspector, inspector, url, *args, token=eco.token)
    assert code == 0, listed
    assert isinstance(listed, dict) and "note_add" in {t["name"] for t in listed["tools"]}
    code, called = await asyncio.to_thread(
        run_inspector,
        inspector,
        url,
        "--transport",
        transport,
        "--method",
        "tools/call",
        "--tool-name",
        "status",
        token=eco.token,
    )
    assert code == 0 and isinstance(called, dict), called
    assert called["structuredContent"]["result"]["name"] == "general"


async def test_the_mcp_inspector_cli_without_the_token_is_refused(
    butler_ecosystem: EcosystemHandle, inspector: object
) -> None:
    url = butler_ecosystem["general"].url
    code, output = await asyncio.to_thread(
        run_inspector, inspector, url, "--method", "tools/list", token=None
    )
    assert code != 0 and "note_add" not in str(output)
