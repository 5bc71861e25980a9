"""OpenAI-compatible chat completions with tool calls (OpenAI, vLLM, Ollama, llama.cpp).

What strict and small servers need, learned against llama-cpp-python's server:
`tool_choice` is sent whenever tools are (some servers show the model no tools without
it), an assistant turn that only calls tools carries `""` as its content (never `null`),
and tool schemas go out without the keywords that grammar-constrained servers turn into
huge or invalid grammars (the butler still checks every argument when the call runs).
"""

from __future__ import annotations

import json
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

# Checked by the butler's own validation when a call runs; left out of what the model
# server sees (llama.cpp expands length and item bounds into grammar repetitions, and a
# long `maxLength` made its server crash).
SERVER_UNSAFE_KEYWORDS = frozenset(
    {"maxLength", "minLength", "maxItems", "minItems", "pattern", "format", "uniqueItems"}
)
RAW_ARGUMENTS_SHOWN = 200


def server_schema(schema: Any) -> Any:
    """`schema` without `SERVER_UNSAFE_KEYWORDS`, at every depth (a property named like
    one of them is kept: only keywords inside a schema object are dropped)."""
    if isinstance(schema, list):
        return [server_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SERVER_UNSAFE_KEYWORDS and not isinstance(value, dict):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            kept[key] = {name: server_schema(sub) for name, sub in value.items()}
        else:
            kept[key] = server_schema(value)
    return kept


def to_openai_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        role = message["role"]
        if role == "user":
            wire.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            # Strict servers (llama-cpp-python) refuse a null content with HTTP 500.
            entry: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                entry["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": call["name"],
                            "arguments": json.dumps(call["arguments"]),
                        },
                    }
                    for call in message["tool_calls"]
                ]
            wire.append(entry)
        else:
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": message["tool_call_id"],
                    "content": message["content"],
                }
            )
    return wire


def to_openai_tools(tools: list[ToolSpec], *, compact: bool = True) -> list[dict[str, Any]]:
    """The tools as function definitions; `compact` (the default) as `llm.compact` says."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": server_schema(t.input_schema),
            },
        }
        for t in (compact_tools(tools) if compact else tools)
    ]


def parse_arguments(name: str, arguments: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as an object, or ({}, why they cannot be used). Raw
    control characters inside strings (a newline a model did not escape) are accepted."""
    if isinstance(arguments, dict):
        return arguments, None
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}, None
    if not isinstance(arguments, str):
        return {}, f"arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
    try:
        parsed = json.loads(arguments, strict=False)
    except ValueError as exc:
        shown = arguments[:RAW_ARGUMENTS_SHOWN]
        return {}, f"arguments of {name!r} are not valid JSON ({exc}): {shown!r}"
    if not isinstance(parsed, dict):
        return {}, f"arguments of {name!r} must be a JSON object, got {type(parsed).__name__}"
    return parsed, None


def parse_openai_response(body: dict[str, Any]) -> ModelTurn:
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelError(f"chat completion without choices[0].message: {str(body)[:300]}") from None
    if not isinstance(message, dict):
        raise ModelError(f"chat completion whose message is not an object: {str(body)[:300]}")
    calls = []
    for index, raw in enumerate(message.get("tool_calls") or []):
        function = (raw.get("function") if isinstance(raw, dict) else None) or {}
        name = str(function.get("name") or "")
        arguments, problem = parse_arguments(name, function.get("arguments"))
        call_id = (raw.get("id") if isinstance(raw, dict) else None) or f"call_{index}"
        calls.append(ToolCall(call_id, name, arguments, problem))
    usage = body.get("usage") or {}
    finish = choice.get("finish_reason")
    content = message.get("content")
    return ModelTurn(
        text=content if isinstance(content, str) else "",
        tool_calls=tuple(calls),
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        cached_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
        truncated=f"finish_reason={finish}" if finish == "length" else None,
    )


class OpenAIChatModel:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout)

    def payload(
        self, request: SessionRequest, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": to_openai_messages(request.system, messages),
        }
        if self._max_tokens is not None:
            payload["max_tokens"] = self._max_tokens
        if self._temperature is not None:
            payload["temperature"] = self._temperature
        if tools:
            payload["tools"] = to_openai_tools(tools)
            payload["tool_choice"] = "auto"
        return payload

    async def complete(
        self, request: SessionRequest, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> ModelTurn:
        payload = self.payload(request, messages, tools)
        return parse_openai_response(await post_model_request(self._client, self._url, payload))

    async def aclose(self) -> None:
        await self._client.aclose()
