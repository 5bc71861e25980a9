"""The Claude Code CLI as a runtime: one `claude -p` process per session, whose MCP
configuration names only this butler's endpoint and whose environment holds only the
variables the spec declares."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from butlers.llm.types import ModelError, SessionRequest, SessionTrace, first_user_text

# Variables a CLI needs to run at all; nothing else of the butler's environment leaks in.
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")


def render_mcp_config(butler: str, mcp_url: str) -> dict[str, Any]:
    return {"mcpServers": {butler: {"type": "http", "url": mcp_url}}}


def build_command(
    executable: str, butler: str, config_path: str, request: SessionRequest, model: str | None
) -> list[str]:
    command = [
        executable,
        "-p",
        first_user_text(request),
        "--mcp-config",
        config_path,
        "--strict-mcp-config",
        "--allowedTools",
        f"mcp__{butler}__*",
        "--disallowedTools",
        f"mcp__{butler}__trigger,mcp__{butler}__tick",
        "--output-format",
        "json",
        "--max-turns",
        str(request.max_turns),
    ]
    if request.system:
        command += ["--append-system-prompt", request.system]
    if model:
        command += ["--model", model]
    return command


def session_process_env(request: SessionRequest, base: dict[str, str]) -> dict[str, str]:
    return {**{k: v for k, v in base.items() if k in BASE_ENV}, **request.env}


class ClaudeCodeRuntime:
    def __init__(
        self, *, executable: str, mcp_url: str, model: str | None, base_env: dict[str, str]
    ) -> None:
        self._executable = executable
        self._mcp_url = mcp_url
        self._base_env = base_env
        self.model_name = model

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str:
        with tempfile.TemporaryDirectory(prefix="butlers-claude-") as tmp:
            config_path = os.path.join(tmp, "mcp.json")
            config = json.dumps(render_mcp_config(request.butler, self._mcp_url))
            await asyncio.to_thread(Path(config_path).write_text, config)
            command = build_command(
                self._executable, request.butler, config_path, request, self.model_name
            )
            try:
                process = await asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=session_process_env(request, self._base_env),
                    cwd=tmp,
                )
            except OSError as exc:
                raise ModelError(
                    f"cannot run {self._executable!r} ({exc.strerror}): install the Claude Code "
                    "CLI or set BUTLERS_CLAUDE_PATH"
                ) from None
            try:
                stdout, stderr = await process.communicate()
            finally:
                if process.returncode is None:  # cancelled (timeout): do not leave it running
                    process.kill()
                    with contextlib.suppress(ProcessLookupError):
                        await process.wait()
        return parse_result(stdout, stderr, process.returncode, trace)

    async def aclose(self) -> None:
        """Nothing to release: every session's process ends with the session."""


def parse_result(stdout: bytes, stderr: bytes, code: int | None, trace: SessionTrace) -> str:
    try:
        body = json.loads(stdout.decode(errors="replace") or "null")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ModelError(f"claude exited with {code} without a JSON result: {stderr[-300:]!r}")
    usage = body.get("usage") or {}
    trace.add_usage(usage.get("input_tokens"), usage.get("output_tokens"))
    if body.get("is_error") or code:
        raise ModelError(f"claude failed ({body.get('subtype') or code}): {body.get('result')}")
    return str(body.get("result") or "")
