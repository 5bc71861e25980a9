"""The Claude Code CLI as a runtime: one `claude -p` process per session.

Its MCP configuration names only this butler's endpoint, with a token minted for this
one session: the butler's access rule sees a session and shows and allows exactly
what it shows the HTTP adapters' sessions. Claude Code's own tools (shell, files,
web) are disallowed; the classifier's sessions get no MCP server at all. The prompt
goes in on stdin (argv is visible to every user in `ps`), the token in a file only
this user can read; the environment holds only the variables the spec declares.
Its output is read as a stream of events (`llm/claude_stream.py`), so each model call
of the session is recorded; its tool calls are recorded by the butler as they arrive
over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from butlers.auth.tokens import TokenBook
from butlers.llm.anthropic import anthropic_usage
from butlers.llm.claude_stream import StreamLine, read_stream
from butlers.llm.types import ModelError, SessionRequest, SessionTrace, first_user_text

# Variables a CLI needs to run at all; nothing else of the butler's environment leaks in.
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
# Claude Code's built-in tools: a session of a butler has that butler's tools, nothing else.
BUILTIN_TOOLS = (
    "Bash", "BashOutput", "KillShell", "Edit", "MultiEdit", "Write", "Read", "Glob", "Grep",
    "LS", "NotebookEdit", "NotebookRead", "WebFetch", "WebSearch", "Task", "Agent",
    "TodoWrite", "ExitPlanMode", "SlashCommand", "Skill",
)  # fmt: skip
LINE_LIMIT = 16 * 1024 * 1024  # one event of the CLI's stream (a large tool result)


def render_mcp_config(butler: str, mcp_url: str, token: str | None) -> dict[str, Any]:
    """Only this butler's endpoint, with the session's token; no server without one."""
    if token is None:
        return {"mcpServers": {}}
    server = {"type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {token}"}}
    return {"mcpServers": {butler: server}}


def build_command(
    executable: str, butler: str, config_path: str, request: SessionRequest, model: str | None
) -> list[str]:
    """The argv of one session; the prompt is not on it (it goes in on stdin)."""
    command = [
        executable,
        "-p",
        "--mcp-config",
        config_path,
        "--strict-mcp-config",
        "--disallowedTools",
        ",".join(BUILTIN_TOOLS),
        "--output-format",
        "stream-json",
        "--verbose",
        "--max-turns",
        str(request.max_turns),
    ]
    if request.tools:
        command += ["--allowedTools", f"mcp__{butler}__*"]
    if request.system:
        command += ["--append-system-prompt", request.system]
    if model:
        command += ["--model", model]
    return command


def session_process_env(request: SessionRequest, base: dict[str, str]) -> dict[str, str]:
    return {**{k: v for k, v in base.items() if k in BASE_ENV}, **request.env}


class ClaudeCodeRuntime:
    def __init__(
        self,
        *,
        executable: str,
        mcp_url: str,
        model: str | None,
        base_env: dict[str, str],
        tokens: TokenBook,
    ) -> None:
        self._executable = executable
        self._mcp_url = mcp_url
        self._base_env = base_env
        self._tokens = tokens
        self.model_name = model
        # Its tool calls reach the butler over HTTP: the butler records them as they run.
        self.records_tool_calls = False

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str:
        token = self._tokens.issue_session(request.session_id) if request.tools else None
        try:
            with tempfile.TemporaryDirectory(prefix="butlers-claude-") as tmp:
                config_path = os.path.join(tmp, "mcp.json")
                config = json.dumps(render_mcp_config(request.butler, self._mcp_url, token))
                await asyncio.to_thread(_write_private, config_path, config)
                command = build_command(
                    self._executable, request.butler, config_path, request, self.model_name
                )
                start = (datetime.now(UTC), time.monotonic())
                lines, stderr, code = await self._run(command, request, tmp)
        finally:
            if token is not None:
                self._tokens.revoke(token)
        first: dict[str, Any] = {
            "messages": [{"role": "user", "content": first_user_text(request)}]
        }
        if request.system:
            first["system"] = request.system
        try:
            body = read_stream(lines, first, start, request.butler, trace)
        except ModelError:
            raise ModelError(
                f"claude exited with {code} without a JSON result: {stderr[-300:]!r}"
            ) from None
        return parse_result(body, code, trace)

    async def _run(
        self, command: list[str], request: SessionRequest, cwd: str
    ) -> tuple[list[StreamLine], bytes, int | None]:
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=session_process_env(request, self._base_env),
                cwd=cwd,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise ModelError(
                f"cannot run {self._executable!r} ({exc.strerror}): install the Claude Code "
                "CLI or set BUTLERS_CLAUDE_PATH"
            ) from None
        assert process.stdin and process.stdout and process.stderr
        stderr_read = asyncio.ensure_future(process.stderr.read())
        lines: list[StreamLine] = []
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(first_user_text(request).encode())
                await process.stdin.drain()
            process.stdin.close()
            try:
                while data := await process.stdout.readline():
                    lines.append(StreamLine(datetime.now(UTC), time.monotonic(), data))
            except ValueError:  # a line past LINE_LIMIT
                raise ModelError(
                    f"claude wrote an event longer than {LINE_LIMIT} bytes; the session stops"
                ) from None
            stderr = await stderr_read
            await process.wait()
        finally:
            if process.returncode is None:  # cancelled (timeout): do not leave it running
                process.kill()
                with contextlib.suppress(ProcessLookupError):
                    await process.wait()
            stderr_read.cancel()
        return lines, stderr, process.returncode

    async def aclose(self) -> None:
        """Nothing to release: every session's process ends with the session."""


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)


def parse_result(body: dict[str, Any], code: int | None, trace: SessionTrace) -> str:
    """The session's answer from the CLI's result event; its totals into `trace`."""
    usage = body.get("usage") or {}
    trace.add_usage(anthropic_usage(usage)[0], usage.get("output_tokens"))
    if body.get("is_error") or code:
        raise ModelError(f"claude failed ({body.get('subtype') or code}): {body.get('result')}")
    return str(body.get("result") or "")
