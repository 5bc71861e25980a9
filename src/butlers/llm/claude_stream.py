"""Reading `claude -p --output-format stream-json --verbose`: one JSON event a line.

The stream's `assistant` events are the model's replies (one API message may come as
several events sharing its id), its `user` events the tool results fed back, and its
last `result` event what `--output-format json` would print. Each API message becomes
one model call of the session (`LlmCallRecord`): the tool results sent since the
previous reply, the reply's text and tool calls, its tokens, and its timing as seen
from the stream (from the previous event to the message's last event)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from butlers.llm.anthropic import anthropic_usage
from butlers.llm.types import LlmCallRecord, ModelError, SessionTrace


@dataclass(frozen=True)
class StreamLine:
    """One line of the CLI's stdout and when it arrived."""

    at: datetime  # wall clock
    monotonic: float
    data: bytes


@dataclass
class _Call:
    started_at: datetime
    started: float
    request: dict[str, Any]
    model: str | None
    ended: float = 0.0
    content: list[Any] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)


def _events(lines: list[StreamLine]) -> list[tuple[StreamLine, dict[str, Any]]]:
    events = []
    for line in lines:
        try:
            event = json.loads(line.data.decode(errors="replace"))
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append((line, event))
    return events


def _tool_name(name: str, butler: str) -> str:
    """`mcp__<butler>__<tool>` as the butler's own tool name."""
    return name.removeprefix(f"mcp__{butler}__")


def _response(call: _Call, butler: str) -> dict[str, Any]:
    blocks = [b for b in call.content if isinstance(b, dict)]
    return {
        "text": "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text"),
        "tool_calls": [
            {
                "id": b.get("id"),
                "name": _tool_name(str(b.get("name", "")), butler),
                "arguments": b.get("input"),
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ],
    }


def _tool_results(event: dict[str, Any]) -> list[dict[str, Any]]:
    content = (event.get("message") or {}).get("content")
    if not isinstance(content, list):
        return [{"role": "user", "content": content}]
    return [
        {
            "role": "tool",
            "tool_call_id": block.get("tool_use_id"),
            "content": block.get("content"),
            "is_error": bool(block.get("is_error")),
        }
        for block in content
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def read_stream(
    lines: list[StreamLine],
    first: dict[str, Any],
    start: tuple[datetime, float],
    butler: str,
    trace: SessionTrace,
) -> dict[str, Any]:
    """Record each model call of the stream into `trace`; return the `result` event.

    `first` is what the session sent first (prompt, system), `start` when the process
    started (wall clock, monotonic)."""
    calls: dict[str, _Call] = {}
    pending: dict[str, Any] = dict(first)
    last_at, last = start
    result: dict[str, Any] | None = None
    for line, event in _events(lines):
        kind = event.get("type")
        if kind == "assistant" and isinstance(event.get("message"), dict):
            message = event["message"]
            key = str(message.get("id") or f"message-{len(calls)}")
            call = calls.get(key)
            if call is None:
                call = calls[key] = _Call(last_at, last, pending, message.get("model"))
                pending = {"messages": []}
            if isinstance(message.get("content"), list):
                call.content += message["content"]
            call.usage = message.get("usage") or call.usage
            call.ended = line.monotonic
        elif kind == "user":
            pending.setdefault("messages", []).extend(_tool_results(event))
        elif kind == "result":
            result = event
        last_at, last = line.at, line.monotonic
    for call in calls.values():
        total, read, written = anthropic_usage(call.usage)
        trace.add_llm_call(
            LlmCallRecord(
                started_at=call.started_at,
                duration_ms=round(max(0.0, call.ended - call.started) * 1000, 3),
                request=call.request,
                response=_response(call, butler),
                input_tokens=total,
                output_tokens=call.usage.get("output_tokens"),
                cached_tokens=read,
                cache_write_tokens=written,
                model=call.model,
            )
        )
    if result is None:
        # `--output-format json` (one object, no type) is read the same way.
        whole = b"".join(line.data for line in lines).decode(errors="replace")
        try:
            body = json.loads(whole or "null")
        except ValueError:
            body = None
        if isinstance(body, dict):
            result = body
    if result is None:
        raise ModelError("claude ended without a result event")
    return result
