"""The Claude Code adapter against a fake `claude` executable on PATH."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from butlers.auth.tokens import TokenBook
from butlers.llm.claude_code import BUILTIN_TOOLS, ClaudeCodeRuntime
from butlers.llm.claude_stream import StreamLine
from butlers.llm.types import ModelError, SessionRequest, SessionTrace

FAKE_CLAUDE = """#!{python}
import json, os, sys
argv = sys.argv[1:]
config_path = argv[argv.index("--mcp-config") + 1]
config = json.load(open(config_path))
report = {{"argv": argv, "env": sorted(os.environ), "config": config,
          "config_mode": oct(os.stat(config_path).st_mode & 0o777),
          "stdin": sys.stdin.read(), "key": os.environ.get("ANTHROPIC_API_KEY")}}
open(os.environ["FAKE_CLAUDE_REPORT"], "w").write(json.dumps(report))
if os.environ.get("FAKE_CLAUDE_FAIL"):
    failure = {{"type": "result", "is_error": True, "subtype": "error_max_turns", "result": "x"}}
    print(json.dumps(failure))
    sys.exit(1)
print(json.dumps({{"type": "result", "is_error": False, "result": "Hello from claude",
                  "usage": {{"input_tokens": 7, "output_tokens": 2}}}}))
"""
PROMPT = "Delete the contact of Alice Smith, phone +44 7700 900123"


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
        session_id="s-1",
        system="You are health.",
        prompt=PROMPT,
        max_turns=3,
        env={"FAKE_CLAUDE_REPORT": str(tmp_path / "report.json"), "ANTHROPIC_API_KEY": "ak", **env},
    )


def _runtime(path: str, tokens: TokenBook | None = None, **overrides: object) -> ClaudeCodeRuntime:
    options: dict[str, object] = {
        "executable": "claude",
        "mcp_url": "http://127.0.0.1:4242/mcp",
        "model": "sonnet",
        "base_env": {"PATH": path, "TEST_SECRET_CANARY": "leak-me"},
        "tokens": tokens or TokenBook(),
    }
    return ClaudeCodeRuntime(**(options | overrides))  # type: ignore[arg-type]


def _report(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return dict(json.loads((tmp_path / "report.json").read_text()))


async def test_claude_runs_locked_down_to_its_butler(tmp_path: Path, fake_claude_path: str):
    trace = SessionTrace()
    output = await _runtime(fake_claude_path).run(_request(tmp_path), trace)
    report = _report(tmp_path)
    argv = report["argv"]
    assert output == "Hello from claude" and (trace.input_tokens, trace.output_tokens) == (7, 2)
    assert list(report["config"]["mcpServers"]) == ["health"]
    server = report["config"]["mcpServers"]["health"]
    assert (server["type"], server["url"]) == ("http", "http://127.0.0.1:4242/mcp")
    assert (
        "--strict-mcp-config" in argv and argv[argv.index("--allowedTools") + 1] == "mcp__health__*"
    )
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "-p" in argv
    assert "TEST_SECRET_CANARY" not in report["env"] and report["key"] == "ak"


async def test_the_prompt_goes_in_on_stdin_never_on_argv(tmp_path: Path, fake_claude_path: str):
    """argv is visible to every user of the machine (`ps`)."""
    await _runtime(fake_claude_path).run(_request(tmp_path), SessionTrace())
    report = _report(tmp_path)
    assert report["stdin"] == PROMPT
    assert not any("Alice" in arg or "7700" in arg for arg in report["argv"])


async def test_the_session_connects_with_its_own_token_revoked_afterwards(
    tmp_path: Path, fake_claude_path: str
):
    """The butler sees a session, and applies the session rule to this connection."""
    tokens = TokenBook()
    await _runtime(fake_claude_path, tokens).run(_request(tmp_path), SessionTrace())
    report = _report(tmp_path)
    header = report["config"]["mcpServers"]["health"]["headers"]["Authorization"]
    token = header.removeprefix("Bearer ")
    assert token.startswith("bs_") and report["config_mode"] == "0o600"
    assert tokens.verify(token) is None, "the session's token outlived the session"
    assert tokens.session_count == 0


async def test_the_token_identifies_the_session_while_it_runs(tmp_path: Path):
    seen = {}

    class Recording(ClaudeCodeRuntime):
        async def _run(self, command, request, cwd):  # type: ignore[no-untyped-def]
            config = json.loads(Path(command[command.index("--mcp-config") + 1]).read_text())  # noqa: ASYNC240
            header = config["mcpServers"]["health"]["headers"]["Authorization"]
            seen["identity"] = tokens.verify(header.removeprefix("Bearer "))
            body = {"type": "result", "is_error": False, "result": "ok"}
            return [StreamLine(datetime.now(UTC), 0.0, json.dumps(body).encode())], b"", 0

    tokens = TokenBook()
    runtime = Recording(
        executable="claude", mcp_url="http://x/mcp", model=None, base_env={}, tokens=tokens
    )
    await runtime.run(_request(tmp_path), SessionTrace())
    identity = seen["identity"]
    assert identity is not None and (identity.kind, identity.name) == ("session", "s-1")


async def test_builtin_tools_are_disallowed(tmp_path: Path, fake_claude_path: str):
    await _runtime(fake_claude_path).run(_request(tmp_path), SessionTrace())
    argv = _report(tmp_path)["argv"]
    disallowed = set(argv[argv.index("--disallowedTools") + 1].split(","))
    assert {"Bash", "Read", "Write", "Edit", "WebFetch"} <= disallowed == set(BUILTIN_TOOLS)


async def test_a_session_without_tools_gets_no_mcp_server(tmp_path: Path, fake_claude_path: str):
    """The switchboard's classifier: no butler endpoint, no token, no allowed tools."""
    tokens = TokenBook()
    request = replace(_request(tmp_path), tools=False)
    await _runtime(fake_claude_path, tokens).run(request, SessionTrace())
    report = _report(tmp_path)
    assert report["config"] == {"mcpServers": {}}
    assert "--allowedTools" not in report["argv"]


async def test_claude_failure_is_a_model_error(tmp_path: Path, fake_claude_path: str):
    with pytest.raises(ModelError, match="error_max_turns"):
        await _runtime(fake_claude_path).run(
            _request(tmp_path, FAKE_CLAUDE_FAIL="1"), SessionTrace()
        )


async def test_missing_claude_executable_says_what_to_install(tmp_path: Path):
    runtime = _runtime("", executable=str(tmp_path / "nope"))
    with pytest.raises(ModelError, match="BUTLERS_CLAUDE_PATH"):
        await runtime.run(_request(tmp_path), SessionTrace())


STREAMING_CLAUDE = """#!{python}
import json, sys, time
sys.stdin.read()
def say(event):
    print(json.dumps(event), flush=True)
say({{"type": "system", "subtype": "init", "tools": ["mcp__health__state_set"]}})
usage = {{"input_tokens": 30, "cache_read_input_tokens": 1200, "output_tokens": 9}}
message = {{"id": "msg_1", "model": "claude-haiku-4-5", "usage": usage}}
text = {{"type": "text", "text": "Saving."}}
say({{"type": "assistant", "message": dict(message, content=[text])}})
time.sleep(0.05)
tool = {{"type": "tool_use", "id": "toolu_1", "name": "mcp__health__state_set",
        "input": {{"key": "goal", "value": 75}}}}
say({{"type": "assistant", "message": dict(message, content=[tool])}})
result = {{"type": "tool_result", "tool_use_id": "toolu_1", "content": "stored", "is_error": False}}
say({{"type": "user", "message": {{"role": "user", "content": [result]}}}})
usage = {{"input_tokens": 45, "cache_read_input_tokens": 1200, "output_tokens": 4,
    "cache_creation_input_tokens": 100}}
say({{"type": "assistant", "message": {{"id": "msg_2", "model": "claude-haiku-4-5",
    "usage": usage, "content": [{{"type": "text", "text": "Done."}}]}}}})
say({{"type": "result", "subtype": "success", "is_error": False, "result": "Done.",
     "usage": {{"input_tokens": 75, "output_tokens": 13}}}})
"""


async def test_each_model_call_of_the_stream_is_recorded(tmp_path: Path):
    exe = tmp_path / "claude"
    exe.write_text(STREAMING_CLAUDE.format(python=sys.executable))
    exe.chmod(0o755)
    trace = SessionTrace()
    runtime = _runtime(os.environ.get("PATH", ""), executable=str(exe))
    assert await runtime.run(_request(tmp_path), trace) == "Done."
    assert (trace.input_tokens, trace.output_tokens) == (75, 13)
    first, second = trace.llm_calls
    assert first.model == "claude-haiku-4-5"
    # Input counts every part: after the cache breakpoint, read from the cache, written to it.
    assert (first.input_tokens, first.cached_tokens, first.output_tokens) == (1230, 1200, 9)
    assert (second.input_tokens, second.cached_tokens, second.cache_write_tokens) == (
        1345,
        1200,
        100,
    )
    assert first.response == {
        "text": "Saving.",
        "tool_calls": [
            {"id": "toolu_1", "name": "state_set", "arguments": {"key": "goal", "value": 75}}
        ],
    }
    assert first.request["messages"][0]["content"] == PROMPT
    assert first.request["system"] == "You are health."
    assert first.duration_ms >= 40  # from the process start to the message's last event
    assert second.request == {
        "messages": [
            {"role": "tool", "tool_call_id": "toolu_1", "content": "stored", "is_error": False}
        ]
    }
    assert second.response == {"text": "Done.", "tool_calls": []}
    assert first.started_at <= second.started_at
