"""`butlers send`: one message through the switchboard of a running ecosystem."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from butlers.ecosystem.control import PidFile
from butlers.ecosystem.state import read_state
from butlers.errors import EcosystemError
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed
from butlers.switchboard.envelope import build_envelope

SHOWN = 400  # characters of a prompt, answer or error printed unless --full


def short(text: str, full: bool = False) -> str:
    """`text`, cut to SHOWN characters (a runaway answer must not flood the terminal)."""
    if full or len(text) <= SHOWN:
        return text
    return f"{text[:SHOWN]}… ({len(text) - SHOWN} more characters; --full prints them)"


async def send_message(
    data_dir: Path, text: str, *, wait: bool, timeout: float, full: bool = False
) -> int:
    state = read_state(data_dir) if PidFile(data_dir).read() else None
    if state is None:
        raise EcosystemError(f"no ecosystem is running in {data_dir}; start one with `butlers up`")
    url = state.switchboard
    if not url:
        raise EcosystemError("the running roster has no butler with the switchboard module")
    envelope = build_envelope(text, channel="cli", provider="butlers")
    token = state.token
    if not token:
        raise EcosystemError(f"{data_dir / 'ecosystem.json'} has no token; restart `butlers up`")
    client = McpClient(
        {"Authorization": f"Bearer {token}"}, timeout=timeout + 30, client_name="butlers send"
    )
    try:
        result = await client.call_tool(
            url, "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": wait}
        )
    except (ToolFailed, McpError) as exc:
        raise EcosystemError(f"the switchboard refused the message: {exc}") from None
    except EndpointUnavailable as exc:
        raise EcosystemError(f"the switchboard at {url} cannot be reached: {exc}") from None
    finally:
        await client.aclose()
    answer: dict[str, Any] = result.data
    print(f"request {answer['request_id']}: {answer['status']}")
    if not wait:
        return 0
    return print_answer(answer, full)


def print_answer(answer: dict[str, Any], full: bool = False) -> int:
    """The classification and every route of a message that was waited for, each text
    cut to SHOWN characters unless `full`; 1 when a route failed."""
    classification = answer["classification"]
    if classification["fallback"]:
        print(f"classification fell back to general: {short(classification['reason'], full)}")
    failed = 0
    for route in answer["routes"]:
        print(
            f"→ {route['butler']:<13} {route['status']:<18} "
            f"session {route['session_id'] or '-'} ({route['duration_ms']} ms)"
        )
        print(f"    prompt: {short(route['prompt'], full)}")
        if route["tool_calls"]:
            print(f"    tools:  {', '.join(route['tool_calls'])}")
        if route["output"]:
            print(f"    answer: {short(route['output'], full)}")
        if route["error"]:
            print(f"    error:  {short(route['error'], full)}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0
