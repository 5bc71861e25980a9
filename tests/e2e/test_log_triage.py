"""The log triage commands of the debugging guide find what they look for.

Every butler logs one line per record, tagged with its name, into one directory
(`<data-dir>/logs/`, concatenated into `.tmp/e2e-logs/e2e-latest.log` after a run).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from butlers.testing.script_server import Script, call, step

from .harness.ecosystem import EcosystemHandle
from .test_switchboard_flow import classify_as, ingest

TRIAGE = {
    "LLM invocations": r"spawner.*trigger",
    "MCP tool calls": r"tool_span|call_tool",
    "module failures": r"Module.*disabled|Module.*failed",
    "routing decisions": r"classify_message|route.*target",
}


def _logs(handle: EcosystemHandle) -> str:
    if handle.log_dir is None:
        pytest.skip(f"backend {handle.backend!r} keeps no local logs")
    return "".join(
        p.read_text(errors="replace") for p in sorted(Path(handle.log_dir).glob("*.log"))
    )


async def test_triage_greps_find_sessions_tool_calls_module_failures_and_routing(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("switchboard", classify_as(("health", "Log weight 83 kg", "83kg")))
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=83, unit="kg")]),
        step("Logged."),
    )
    await ingest(butler_ecosystem, "Log my weight: 83kg")
    logs = _logs(butler_ecosystem)
    for what, pattern in TRIAGE.items():
        assert re.search(pattern, logs), f"no {what} in the logs ({pattern})"
    health_lines = [line for line in logs.splitlines() if "[health]" in line]
    assert any("call_tool measurement_log ok" in line for line in health_lines)
    assert any(
        re.search(r"Module telegram failed \(phase credentials\)", line)
        for line in logs.splitlines()
    )
