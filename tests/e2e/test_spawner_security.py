"""The security domain for sessions (document 000): credential sandbox, MCP lockdown,
redaction of secrets from session rows and logs."""

from __future__ import annotations

import json

import pytest

from butlers.modules.registry import REGISTRY
from butlers.testing.script_server import Script, call, step

from .harness.ecosystem import EcosystemHandle
from .harness.runtime import CANARY_NAME, CANARY_VALUE, E2E_API_KEY

SWITCHBOARD_ONLY = {"classify_message", "route"}


async def _tool_names(eco: EcosystemHandle, butler: str) -> set[str]:
    client = await eco.clients.get(eco[butler].url)
    return {t.name for t in await client.list_tools()}


async def test_session_cannot_see_an_undeclared_variable(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("health", step("nothing to see"))
    await butler_ecosystem.call("health", "trigger", {"prompt": "What secrets do you have?"})
    request = llm_script.requests_for("health")[-1]
    assert CANARY_NAME not in request["env"]
    assert CANARY_VALUE not in json.dumps(request)


async def test_session_lists_only_its_own_butlers_tools(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("relationship", step("ok"))
    await butler_ecosystem.call("relationship", "trigger", {"prompt": "list your tools"})
    listed = {t["name"] for t in llm_script.requests_for("relationship")[-1]["tools"]}
    hidden = {"trigger", "tick", *REGISTRY["approvals"].session_hidden_tools}
    assert listed == await _tool_names(butler_ecosystem, "relationship") - hidden
    assert not listed & SWITCHBOARD_ONLY


async def test_session_cannot_call_another_butlers_tool(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    name = "classify_message"  # a switchboard-only tool
    assert name in await _tool_names(butler_ecosystem, "switchboard")
    assert name not in await _tool_names(butler_ecosystem, "health")
    llm_script.route("health", step(tool_calls=[call(name)]), step("could not"))
    result = await butler_ecosystem.call("health", "trigger", {"prompt": f"call {name}"})
    assert result["tool_calls"][0]["name"] == name
    assert result["tool_calls"][0]["is_error"] is True


async def test_runtime_key_never_reaches_session_rows_or_logs(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route(
        "general",
        step(tool_calls=[call("state_set", key="e2e-leak", value=f"key is {E2E_API_KEY}")]),
        step(f"The key is {E2E_API_KEY}"),
    )
    result = await butler_ecosystem.call(
        "general", "trigger", {"prompt": f"remember {E2E_API_KEY}"}
    )
    assert E2E_API_KEY not in json.dumps(result) and "[REDACTED]" in json.dumps(result)
    pool = await butler_ecosystem.pool("general")
    stored = await pool.fetchval(
        "SELECT row_to_json(s)::text FROM sessions s WHERE session_id::text = $1",
        result["session_id"],
    )
    assert E2E_API_KEY not in stored
    log_dir = butler_ecosystem.log_dir
    if log_dir is None:
        pytest.skip(f"butler logs are not files on this machine on {butler_ecosystem.backend}")
    log_files = list(log_dir.glob("*.log"))
    assert log_files
    for log_file in log_files:
        assert E2E_API_KEY not in log_file.read_text(errors="replace"), log_file.name
