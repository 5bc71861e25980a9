"""A butler process keeps out what it does not need (issue 14: idle RSS per butler).

A fresh interpreter imports `butlers.daemon.serve`, builds a butler with modules on a
real schema (tools registered, the access table and schema table installed: FastMCP's
`tools/list` with its `$ref` dereferencing ran), lists its tools as a user would over
MCP and runs a session's toolbox (list, then a call); none of the packages below is
imported by then. Each costs megabytes in every butler process:

- `fastmcp.client` (with beartype, key_value, jwt, ~8 MB): the session toolbox runs on
  the server directly (`daemon.calls.SessionToolServer`);
- `jsonref` and `requests` (~7 MB): FastMCP loads them to inline a `$ref`; tool
  schemas have none (`jsonutil.AnyJson`);
- the OpenTelemetry SDK (with `psutil`, ~1.4 MB) when nothing is traced
  (`telemetry.export`);
- griffe (~2 MB with what its parses leave): FastMCP parses tool docstrings with it;
  butler tools hand theirs over as descriptions (`tooling.tool`);
- modules the butler does not enable (the email module with `imaplib` and `smtplib`,
  telegram, messenger): the registry imports a module when its class is asked for;
- croniter with dateutil (~0.9 MB) in a butler without schedules: the spec and the
  scheduler import it when a cron expression is first validated or computed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from butlers import migrations
from butlers.db.provision import deprovision, provision
from butlers.modules.loader import module_chains

MODULES = {"general": {}, "health": {}, "contacts": {}, "approvals": {}, "switchboard": {}}
NOT_IMPORTED = (
    "fastmcp.client",
    "beartype",
    "key_value",
    "jsonref",
    "requests",
    "opentelemetry.sdk",
    "psutil",
    "griffe",
    "butlers.modules.email",
    "butlers.modules.telegram",
    "butlers.modules.messenger",
    "imaplib",
    "smtplib",
    "croniter",
)

BUILD = """
import asyncio, json, sys
from pathlib import Path

import butlers.daemon.serve  # what the process imports first
from butlers.auth.identity import user
from butlers.daemon.butler import build_butler
from butlers.daemon.calls import SessionToolServer
from butlers.db.pool import create_pool
from butlers.llm.toolbox import session_toolboxes, speaking_as
from butlers.settings import ButlerSettings, RuntimeOverrides
from butlers.spec import ButlerResource
from butlers.telemetry import configure_tracing

async def main(dsn, schema, modules, watched):
    resource = ButlerResource.model_validate({
        "apiVersion": "butlers.dev/v1alpha1", "kind": "Butler", "metadata": {"name": "probe"},
        "spec": {"description": "probe", "port": 41000, "modules": modules},
    })
    settings = ButlerSettings(
        spec_path=Path("unused.yaml"), dsn=dsn, schema=schema, host="127.0.0.1", port=41000,
        runtime=RuntimeOverrides(), tick_interval=3600, environ={},
    )
    pool = await create_pool(dsn, schema)
    configure_tracing("probe")  # as `serve` calls it: nothing to export
    try:
        built = await build_butler(
            resource, pool, settings, schema=schema, mcp_url="http://127.0.0.1:1/mcp"
        )
        try:
            with speaking_as(user()):
                listed = await built.server.list_tools()
            open_toolbox = session_toolboxes(SessionToolServer(built.server), "probe")
            async with open_toolbox("s-imports") as toolbox:
                session_tools = await toolbox.list()
                _, text, is_error = await toolbox.call("state_set", {"key": "k", "value": [1]})
        finally:
            await built.aclose()
    finally:
        await pool.close()
    print(json.dumps({
        "listed": len(listed), "session_tools": len(session_tools), "call": [text, is_error],
        "imported": sorted(name for name in watched if name in sys.modules),
    }))

asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])))
"""


async def test_a_built_butler_imports_no_mcp_client_nor_jsonref(
    pg_admin_dsn: str, session_tag: str
) -> None:
    schema = f"{session_tag}imports"
    credentials = await provision(pg_admin_dsn, schema)
    try:
        dsn = credentials.dsn(pg_admin_dsn)
        await migrations.upgrade(dsn, schema, [migrations.CORE, *module_chains(MODULES)])
        done = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-c",
                BUILD,
                dsn,
                schema,
                json.dumps(MODULES),
                json.dumps(NOT_IMPORTED),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        await deprovision(pg_admin_dsn, schema)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["listed"] > report["session_tools"] > 10  # the butler was really built
    assert report["call"][1] is False, report["call"]
    assert report["imported"] == []
