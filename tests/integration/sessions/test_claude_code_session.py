"""A claude-code session meets the same rule as the in-memory toolbox, over real HTTP.

The real CLI cannot run here; a stand-in `claude` does what it does with the MCP
configuration the adapter writes: connects to the butler's `/mcp` with the header it
names, lists the tools and calls some, and reports what it saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn

from butlers.auth.http import HostPolicy
from butlers.auth.tokens import digest, new_user_token
from butlers.daemon.butler import build_butler
from butlers.daemon.calls import SessionToolServer
from butlers.daemon.http import build_http_app
from butlers.daemon.serve import bind_socket
from butlers.db.embedded import free_port
from butlers.llm.toolbox import session_toolboxes
from butlers.settings import AuthSettings
from butlers.stores.sessions import SessionStore
from tests.support.butlers import make_resource, make_settings

STAND_IN = """#!{python}
import asyncio, json, os, sys
import httpx2 as httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

argv = sys.argv[1:]
config = json.load(open(argv[argv.index("--mcp-config") + 1]))
server = config["mcpServers"]["health"]

async def main():
    report = {{"prompt": sys.stdin.read(), "calls": {{}}}}
    async with httpx.AsyncClient(headers=server["headers"], timeout=30) as http:
        async with streamable_http_client(server["url"], http_client=http) as (read, write):
            changed = []

            async def on_message(message):
                kind = type(getattr(message, "root", message)).__name__
                if kind == "ToolListChangedNotification":
                    changed.append(kind)

            async with ClientSession(read, write, message_handler=on_message) as session:
                await session.initialize()
                listed = (await session.list_tools()).tools
                report["tools"] = sorted(t.name for t in listed)
                loader = [t for t in listed if t.name == "load_tools"]
                report["loadable"] = loader[0].input_schema["properties"]["names"]["items"]["enum"]
                loaded = await session.call_tool("load_tools", {{"names": ["state_set"]}})
                report["loaded"] = [bool(loaded.is_error), len(changed)]
                bad = await session.call_tool("load_tools", {{"names": ["nope"]}})
                report["bad_load"] = [bool(bad.is_error), bad.content[0].text]
                report["tools_after"] = sorted(t.name for t in (await session.list_tools()).tools)
                for name, arguments in [
                    ("state_set", {{"key": "from-claude", "value": 1}}),
                    ("schedule_create", {{"name": "injected", "cron": "* * * * *", "prompt": "x"}}),
                    ("trigger", {{"prompt": "again"}}),
                ]:
                    result = await session.call_tool(name, arguments)
                    report["calls"][name] = bool(result.is_error)
    report["token"] = server["headers"]["Authorization"].removeprefix("Bearer ")
    open(os.environ["CLAUDE_REPORT"], "w").write(json.dumps(report))
    print(json.dumps({{"type": "result", "is_error": False, "result": "done"}}))

asyncio.run(main())
"""


@pytest.fixture
async def served(butler_schema: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """A butler on the claude-code adapter (the stand-in CLI), served over HTTP."""
    claude = tmp_path / "claude"
    claude.write_text(STAND_IN.format(python=sys.executable))
    claude.chmod(0o755)
    report = tmp_path / "report.json"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    resource = make_resource(env=[{"name": "CLAUDE_REPORT", "value": str(report)}])
    user = new_user_token()
    settings = replace(
        make_settings(adapter="claude-code", claude_path=str(claude)),
        auth=AuthSettings(user_tokens={digest(user): "user"}),
    )
    built = await build_butler(
        resource, butler_schema.pool, settings, schema=butler_schema.schema, mcp_url=url
    )
    mcp, butler, services = built.server, built.context, built.services

    async def ready() -> tuple[bool, dict[str, object]]:
        return True, {}

    app = build_http_app(mcp, "health", ready, book=butler.tokens, hosts=HostPolicy())
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
    sock = bind_socket("127.0.0.1", port, "health")
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the butler's HTTP server did not start"
            await asyncio.sleep(0.02)
        yield {"mcp": mcp, "butler": butler, "services": services, "url": url, "report": report}
    finally:
        server.should_exit = True
        await task
        sock.close()
        await built.aclose()


async def test_a_claude_code_session_sees_and_may_do_what_an_http_adapter_session_may(
    served: dict[str, Any],
) -> None:
    result = await served["services"].spawner.trigger("Remember something, then schedule it")
    assert result.success, result.error
    report = json.loads(served["report"].read_text())
    open_toolbox = session_toolboxes(SessionToolServer(served["mcp"]), "health")
    async with open_toolbox("s-compare") as toolbox:
        listed = await toolbox.list()
    # What the loop would send: the offered tools and `load_tools` naming the others,
    # which the session loads (its client told the list changed) and then lists.
    offered = sorted(t.name for t in listed if not t.on_request)
    assert report["tools"] == sorted([*offered, "load_tools"])
    assert sorted(report["loadable"]) == sorted(t.name for t in listed if t.on_request)
    assert report["loaded"] == [False, 1]
    refused, says = report["bad_load"]
    assert refused and "nope" in says and "state_get" in says and "state_set" not in says
    assert report["tools_after"] == sorted([*offered, "load_tools", "state_set"])
    assert "schedule_create" not in report["tools"] and "trigger" not in report["tools"]
    assert report["calls"] == {"state_set": False, "schedule_create": True, "trigger": True}
    assert report["prompt"] == "Remember something, then schedule it"
    pool = served["butler"].pool
    assert await pool.fetchval("SELECT count(*) FROM scheduled_tasks WHERE name = 'injected'") == 0
    async with httpx.AsyncClient(timeout=5) as http:
        late = await http.post(
            served["url"],
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {report['token']}"},
        )
    assert late.status_code == 401, "the session's token outlived its session"


async def test_a_claude_code_sessions_tool_calls_are_recorded_as_an_http_adapters_are(
    served: dict[str, Any],
) -> None:
    """Its calls reach the butler over HTTP; the butler records them in the session's
    row, refused ones included, in the loop's shape (what the dashboard shows)."""
    result = await served["services"].spawner.trigger("Remember something")
    assert result.success, result.error
    names = [(call["name"], call["is_error"]) for call in result.tool_calls]
    assert names == [
        ("load_tools", False),
        ("load_tools", True),
        ("state_set", False),
        ("schedule_create", True),
        ("trigger", True),
    ]
    loaded, _, stored, refused, _ = result.tool_calls
    assert loaded["result"] == {"loaded": ["state_set"], "already_offered": []}
    assert stored["arguments"] == {"key": "from-claude", "value": 1}
    assert stored["result"]["key"] == "from-claude"
    assert stored["duration_ms"] >= 0 and stored["started_at"]
    assert "not available to an LLM session" in refused["result"]
    row = await SessionStore(served["butler"].pool).get(uuid.UUID(result.session_id))
    assert row is not None and row.tool_calls == result.tool_calls
