"""OpenAI-compatible chat completions with tool calls (OpenAI, vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx

from butlers.llm.types import (
    ModelError,
    ModelTurn,
    SessionRequest,
    ToolCall,
    ToolSpec,
    post_model_request,
)


def to_openai_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        role = message["role"]
        if role == "user":
            wire.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
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


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in tools
    ]


def parse_openai_response(body: dict[str, Any]) -> ModelTurn:
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelError(f"chat completion without choices[0].message: {str(body)[:300]}") from None
    calls = []
    for index, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") or {}
        arguments = function.get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except ValueError:
            raise ModelError(
                f"tool call {function.get('name')!r}: arguments are not JSON"
            ) from None
        calls.append(ToolCall(raw.get("id") or f"call_{index}", function.get("name", ""), parsed))
    usage = body.get("usage") or {}
    return ModelTurn(
        text=message.get("content") or "",
        tool_calls=tuple(calls),
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        cached_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
    )


class OpenAIChatModel:
    def __init__(self, *, base_url: str, model: str, api_key: str | None, timeout: float) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout)

    async def complete(
        self, request: SessionRequest, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> ModelTurn:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": to_openai_messages(request.system, messages),
        }
        if tools:
            payload["tools"] = to_openai_tools(tools)
        return parse_openai_response(await post_model_request(self._client, self._url, payload))

    async def aclose(self) -> None:
        await self._client.aclose()
