"""The Claude Code adapter against a fake `claude` executable on PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from butlers.llm.claude_code import ClaudeCodeRuntime
from butlers.llm.types import ModelError, SessionRequest, SessionTrace

FAKE_CLAUDE = """#!{python}
import json, os, sys
argv = sys.argv[1:]
config = json.load(open(argv[argv.index("--mcp-config") + 1]))
report = {{"argv": argv, "env": sorted(os.environ), "config": config,
          "key": os.environ.get("ANTHROPIC_API_KEY")}}
open(os.environ["FAKE_CLAUDE_REPORT"], "w").write(json.dumps(report))
if os.environ.get("FAKE_CLAUDE_FAIL"):
    failure = {{"type": "result", "is_error": True, "subtype": "error_max_turns", "result": "x"}}
    print(json.dumps(failure))
    sys.exit(1)
print(json.dumps({{"type": "result", "is_error": False, "result": "Hello from claude",
                  "usage": {{"input_tokens": 7, "output_tokens": 2}}}}))
"""


@pytest.fixture
def fake_claude_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "claude"
    exe.write_text(FAKE_CLAUDE.format(python=sys.executable))
    exe.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def _request(tmp_path: Path, **env: str) -> SessionRequest:
    return SessionRequest(
        butler="health",
        session_id="s",
        system="You are health.",
        prompt="hi",
        max_turns=3,
        env={"FAKE_CLAUDE_REPORT": str(tmp_path / "report.json"), "ANTHROPIC_API_KEY": "ak", **env},
    )


async def test_claude_runs_locked_down_to_its_butler(tmp_path: Path, fake_claude_path: str):
    runtime = ClaudeCodeRuntime(
        executable="claude",
        mcp_url="http://127.0.0.1:4242/mcp",
        model="sonnet",
        base_env={"PATH": fake_claude_path, "TEST_SECRET_CANARY": "leak-me"},
    )
    trace = SessionTrace()
    output = await runtime.run(_request(tmp_path), trace)
    report = json.loads((tmp_path / "report.json").read_text())
    argv = report["argv"]
    assert output == "Hello from claude" and (trace.input_tokens, trace.output_tokens) == (7, 2)
    assert report["config"] == {
        "mcpServers": {"health": {"type": "http", "url": "http://127.0.0.1:4242/mcp"}}
    }
    assert (
        "--strict-mcp-config" in argv and argv[argv.index("--allowedTools") + 1] == "mcp__health__*"
    )
    assert argv[argv.index("--output-format") + 1] == "json" and "-p" in argv
    assert "TEST_SECRET_CANARY" not in report["env"] and report["key"] == "ak"


async def test_claude_failure_is_a_model_error(tmp_path: Path, fake_claude_path: str):
    runtime = ClaudeCodeRuntime(
        executable="claude", mcp_url="http://x/mcp", model=None, base_env={"PATH": fake_claude_path}
    )
    with pytest.raises(ModelError, match="error_max_turns"):
        await runtime.run(_request(tmp_path, FAKE_CLAUDE_FAIL="1"), SessionTrace())


async def test_missing_claude_executable_says_what_to_install(tmp_path: Path):
    runtime = ClaudeCodeRuntime(
        executable=str(tmp_path / "nope"), mcp_url="http://x/mcp", model=None, base_env={}
    )
    with pytest.raises(ModelError, match="BUTLERS_CLAUDE_PATH"):
        await runtime.run(_request(tmp_path), SessionTrace())
