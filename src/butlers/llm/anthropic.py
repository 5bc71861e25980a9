"""The Anthropic Messages API with tool use."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import httpx2 as httpx

from butlers.llm.compact import compact_tools
from butlers.llm.types import (
    ModelError,
    ModelTurn,
    SessionRequest,
    ToolCall,
    ToolSpec,
    post_model_request,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
# A prompt-cache breakpoint; a request uses two of the API's four: the end of its stable
# prefix (tools and system, shared by every message to the butler) and the end of its
# conversation (shared by the session's next request).
CACHE_BREAKPOINT = {"type": "ephemeral"}
API_VERSION = "2023-06-01"
TRACKED_SESSIONS = 1024  # sessions whose cache use an adapter remembers (oldest forgotten)
MAX_TOKENS = 4096  # the Messages API needs one; spec.runtime.maxTokens sets it


def to_anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages as Messages API turns; consecutive tool results share one user turn.
    A user's text goes as a text block, so marking it for the cache (`mark_conversation`)
    changes nothing the model reads: the next request's prefix matches this one's."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "user":
            wire.append({"role": "user", "content": [{"type": "text", "text": message["content"]}]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                for c in message.get("tool_calls") or []
            ]
            wire.append({"role": "assistant", "content": blocks})
        else:
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
                "is_error": bool(message.get("is_error")),
            }
            last = wire[-1] if wire else None
            if last and last["role"] == "user" and last["content"][-1]["type"] == "tool_result":
                last["content"].append(block)
            else:
                wire.append({"role": "user", "content": [block]})
    return wire


def mark_conversation(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`wire` with its last block marked for the prompt cache (the second breakpoint):
    the request's whole prefix is cached, and the session's next request, which starts
    with the same turns, reads them at the cache rate and pays in full only what is new
    (the model's reply and the tool results). The API looks back for a cached prefix
    from each breakpoint, so moving the mark to the end each time keeps finding the
    previous request's."""
    if not wire or not wire[-1]["content"]:
        return wire
    last = dict(wire[-1])
    blocks = [dict(b) for b in last["content"]]
    blocks[-1]["cache_control"] = CACHE_BREAKPOINT
    last["content"] = blocks
    return [*wire[:-1], last]


def parse_anthropic_response(body: dict[str, Any]) -> ModelTurn:
    if not isinstance(body.get("content"), list):
        raise ModelError(f"Messages API answer without content: {str(body)[:300]}")
    texts = [b.get("text", "") for b in body["content"] if b.get("type") == "text"]
    calls = tuple(
        ToolCall(b["id"], b["name"], dict(b.get("input") or {}))
        for b in body["content"]
        if b.get("type") == "tool_use"
    )
    stop = body.get("stop_reason")
    total, read, written = anthropic_usage(body.get("usage"))
    return ModelTurn(
        text="".join(texts),
        tool_calls=calls,
        input_tokens=total,
        output_tokens=(body.get("usage") or {}).get("output_tokens"),
        cached_tokens=read,
        cache_write_tokens=written,
        truncated=f"stop_reason={stop}" if stop == "max_tokens" else None,
    )


def anthropic_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    """(input, read from the cache, written to it) of an Anthropic `usage` object.

    The API counts input in three parts: after the last cache breakpoint
    (`input_tokens`), read from the cache and written to it. A call's input is their
    sum, as OpenAI counts it (`prompt_tokens` includes its cached tokens)."""
    usage = usage if isinstance(usage, dict) else {}
    uncached = usage.get("input_tokens")
    read = usage.get("cache_read_input_tokens")
    written = usage.get("cache_creation_input_tokens")
    total = None if uncached is None else uncached + (read or 0) + (written or 0)
    return total, read, written


def anthropic_prefix(system: str, tools: list[ToolSpec]) -> dict[str, Any]:
    """`system` and `tools` as the request's stable prefix, compacted (`llm.compact`)
    and marked for the prompt cache: the API caches tools, then system, up to the
    last block carrying `cache_control`, so one mark at the end covers both."""
    prefix: dict[str, Any] = {}
    if tools:
        prefix["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in compact_tools(tools)
        ]
    if system:
        prefix["system"] = [{"type": "text", "text": system, "cache_control": CACHE_BREAKPOINT}]
    elif tools:
        prefix["tools"][-1]["cache_control"] = CACHE_BREAKPOINT
    return prefix


class AnthropicChatModel:
    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key: str | None,
        timeout: float,
        max_tokens: int = MAX_TOKENS,
        temperature: float | None = None,
    ) -> None:
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self._url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/v1/messages"
        self._model = model
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout)
        # Sessions whose last reply read and wrote nothing of the cache (see `complete`).
        self._uncached: OrderedDict[str, None] = OrderedDict()

    async def complete(
        self, request: SessionRequest, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> ModelTurn:
        """One request. Its conversation is marked for the cache on the session's first
        request, and later while the cache works for the session: a prefix under the
        model's minimum is not cached, and marking the end of a conversation that first
        reaches it would write the whole prompt at 1.25x for a next request that may
        not come (the session's last request is known only by its reply)."""
        wire = to_anthropic_messages(messages)
        if len(messages) == 1 or request.session_id not in self._uncached:
            wire = mark_conversation(wire)
        payload: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": wire,
        }
        if self._temperature is not None:
            payload["temperature"] = min(self._temperature, 1.0)  # the API's range is 0..1
        payload |= anthropic_prefix(request.system, tools)
        turn = parse_anthropic_response(await post_model_request(self._client, self._url, payload))
        self._uncached.pop(request.session_id, None)
        if not (turn.cached_tokens or turn.cache_write_tokens):
            self._uncached[request.session_id] = None
            while len(self._uncached) > TRACKED_SESSIONS:
                self._uncached.popitem(last=False)
        return turn

    async def aclose(self) -> None:
        await self._client.aclose()
