"""A session's model calls as the `llm_calls` table stores them: redacted with the
butler's one policy, and bounded (a conversation's messages can be large).

Each request holds only the messages added since the previous call, so a session's
records grow with what was said, not with the square of its turns."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from butlers.llm.types import LlmCallRecord
from butlers.redaction import Redactor

MAX_EXCHANGE_CHARS = 32_000  # per stored request and per stored response (JSON text)


def bounded(value: Any, limit: int = MAX_EXCHANGE_CHARS) -> Any:
    """`value` itself when its JSON fits in `limit` characters, else a marked preview."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return value
    return {"truncated": True, "chars": len(text), "preview": text[:limit]}


def _redact_exchange(value: Any, redactor: Redactor) -> Any:
    """Secrets masked everywhere; a tool call's sensitive arguments masked by its tool."""
    if not isinstance(value, dict):
        return redactor.value(value)
    redacted = {}
    for key, item in value.items():
        if key == "tool_calls" and isinstance(item, list):
            redacted[key] = redactor.tool_calls(item)
        elif key == "messages" and isinstance(item, list):
            redacted[key] = [_redact_exchange(message, redactor) for message in item]
        else:
            redacted[key] = redactor.value(item)
    return redacted


def stored_llm_calls(
    calls: Iterable[LlmCallRecord], redactor: Redactor, model: str | None
) -> list[dict[str, Any]]:
    """The rows of `llm_calls` for a session's records (keys as `stores.sessions.LlmCall`)."""
    return [
        {
            "model": call.model or model,
            "started_at": call.started_at,
            "duration_ms": max(0.0, call.duration_ms),
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "cached_tokens": call.cached_tokens,
            "cache_write_tokens": call.cache_write_tokens,
            "request": bounded(_redact_exchange(call.request, redactor)),
            "response": None
            if call.response is None
            else bounded(_redact_exchange(call.response, redactor)),
            "error": None if call.error is None else redactor.text(call.error)[:2000],
        }
        for call in calls
    ]
