"""The log triage commands of the debugging guide find what they look for.

Every butler logs one line per record, tagged with its name, into one directory
(`<data-dir>/logs/`, concatenated into `.tmp/e2e-logs/e2e-latest.log` after a run).
The guide's greps are broad; here each must find a line about *this* message (its
session id, its request id) among the lines written while the test ran, so a line
another test left behind cannot satisfy it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from butlers.testing.script_server import Script, call, step
from butlers.waiting import WaitTimeout, wait_until

from .conftest import DATABASE_LINES
from .harness.ecosystem import EcosystemHandle
from .test_switchboard_flow import classify_as, ingest

# The guide's grep per question, and what must be on the same line for this message.
TRIAGE = {
    "LLM invocations": r"spawner.*trigger",
    "MCP tool calls": r"tool_span|call_tool",
    "routing decisions": r"classify_message|route.*target",
}


def _log_files(handle: EcosystemHandle) -> list[Path]:
    if handle.log_dir is None:
        pytest.skip(f"backend {handle.backend!r} keeps no local logs")
    return sorted(Path(handle.log_dir).glob("*.log"))


def _new_lines(handle: EcosystemHandle, offsets: dict[Path, int]) -> list[str]:
    """Lines written to the butlers' logs since `offsets` were taken."""
    lines = []
    for path in _log_files(handle):
        with path.open("rb") as fh:
            fh.seek(offsets.get(path, 0))
            lines += fh.read().decode(errors="replace").splitlines()
    return lines


def _grep(pattern: str, lines: list[str], *, on_line: str, butler: str) -> list[str]:
    return [
        line
        for line in lines
        if re.search(pattern, line) and on_line in line and f"[{butler}]" in line
    ]


async def test_triage_greps_find_this_messages_session_tool_call_and_routing(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    offsets = {path: path.stat().st_size for path in _log_files(butler_ecosystem)}
    llm_script.route("switchboard", classify_as(("health", "Log weight 83.2 kg", "83.2kg")))
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=83.2, unit="kg")]),
        step("Logged."),
    )
    answer = await ingest(butler_ecosystem, "Log my weight: 83.2kg")
    [route] = answer["routes"]

    def all_written() -> list[str] | None:
        # Lines below WARNING are written on each process's next loop turn, after the
        # answer that turn sends: the last of them may land just after `ingest` returns.
        lines = _new_lines(butler_ecosystem, offsets)
        wanted = (
            (TRIAGE["LLM invocations"], route["session_id"], "health"),
            (TRIAGE["MCP tool calls"], "call_tool measurement_log ok", "health"),
            (TRIAGE["routing decisions"], answer["request_id"], "switchboard"),
        )
        if all(_grep(p, lines, on_line=on, butler=b) for p, on, b in wanted):
            return lines
        return None

    try:
        lines = await wait_until(all_written, timeout=5)
    except WaitTimeout:
        lines = _new_lines(butler_ecosystem, offsets)  # the assertions below say what is missing

    invocations = _grep(
        TRIAGE["LLM invocations"], lines, on_line=route["session_id"], butler="health"
    )
    assert invocations, f"no line for health's session {route['session_id']}"
    calls = _grep(
        TRIAGE["MCP tool calls"], lines, on_line="call_tool measurement_log ok", butler="health"
    )
    assert len(calls) == 1, calls
    routing = _grep(
        TRIAGE["routing decisions"], lines, on_line=answer["request_id"], butler="switchboard"
    )
    assert routing and "health=success" in routing[0], routing


async def test_triage_grep_finds_the_failed_channel_modules(
    butler_ecosystem: EcosystemHandle,
) -> None:
    pattern = r"Module.*disabled|Module.*failed"
    lines = "".join(p.read_text(errors="replace") for p in _log_files(butler_ecosystem))
    failed = {
        match.group(1)
        for line in lines.splitlines()
        if re.search(pattern, line) and "[messenger]" in line
        for match in [re.search(r"Module (\w+) failed \(phase credentials\)", line)]
        if match
    }
    assert failed == {"email"}  # telegram runs against the Bot API stand-in


async def test_error_greps_find_this_sessions_failure(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """The guide's `grep -i 'error\\|exception\\|traceback'` and its per-butler form
    `grep -i 'error.*health\\|health.*error'` find the failure of this session."""
    offsets = {path: path.stat().st_size for path in _log_files(butler_ecosystem)}
    word = f"boom-{uuid.uuid4().hex[:8]}"
    llm_script.route("health", step(error=f"model endpoint exploded ({word})"))
    result = await butler_ecosystem.call("health", "trigger", {"prompt": "Log my weight"})
    assert result["success"] is False
    session_id = result["session_id"]

    def matching(pattern: str) -> list[str]:
        return [
            line
            for line in _new_lines(butler_ecosystem, offsets)
            if re.search(pattern, line, re.I) and session_id in line
        ]

    errors = await wait_until(
        lambda: matching(r"error|exception|traceback") or None,
        timeout=5,
        message=lambda: f"no error line for session {session_id}",
    )
    assert all("[health]" in line for line in errors), errors
    assert any(word in line for line in errors), errors
    assert matching(r"error.*health|health.*error") == errors


async def test_butler_log_lines_reach_the_tests_logging_at_their_level(
    butler_ecosystem: EcosystemHandle, llm_script: Script, caplog: pytest.LogCaptureFixture
) -> None:
    """What pytest shows on its console (`--log-cli-level`) and in a failed test's report:
    the butlers' lines, relayed as records of `butlers.e2e.<butler>` at their own level."""
    _log_files(butler_ecosystem)  # skips where the butlers' logs are not on this machine
    llm_script.route("health", step("Fine."))
    with caplog.at_level(logging.INFO, logger="butlers.e2e"):
        result = await butler_ecosystem.call("health", "trigger", {"prompt": "How am I?"})
        records = await wait_until(
            lambda: [r for r in caplog.records if result["session_id"] in r.getMessage()] or None,
            timeout=5,
            message="no relayed line about this session",
        )
    assert {r.name for r in records} == {"butlers.e2e.health"}
    assert {r.levelname for r in records} == {"INFO"}


async def test_the_session_logs_a_working_psql_command_per_database(
    butler_ecosystem: EcosystemHandle, request: pytest.FixtureRequest
) -> None:
    lines = request.config.stash[DATABASE_LINES]
    assert len(lines) == len(butler_ecosystem.names) + 1
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("no psql on this machine to try the logged commands")
    for name in butler_ecosystem.names:
        [line] = [
            line
            for line in lines
            if line.endswith(f"# {name}: schema {butler_ecosystem[name].schema}")
        ]
        command = shlex.split(line.split("#", 1)[0])
        assert command[0] == "psql"
        done = await asyncio.to_thread(
            subprocess.run,
            [psql, *command[1:], "-AtXc", "SELECT current_schema, count(*) FROM state"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("|")[0] == butler_ecosystem[name].schema
