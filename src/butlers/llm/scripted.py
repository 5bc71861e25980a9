"""The scripted model for tests: asks a script server (run by the test process) for the
next step, posting the whole request so the server records it.

A step is JSON: `{"text": str}` or `{"tool_calls": [{"name", "arguments"}]}` or
`{"error": str}`, each optionally with `"delay"` (seconds, to test timeouts) and
`"usage": {"input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens"}`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2 as httpx

from butlers.llm.types import ModelError, ModelTurn, SessionRequest, ToolCall, ToolSpec

REQUEST_TIMEOUT = 60.0  # above the script server's longest hold (HOLD_TIMEOUT)


class ScriptedChatModel:
    def __init__(self, *, script_url: str, model: str | None) -> None:
        self._url = script_url.rstrip("/") + "/next"
        self._model = model or "scripted"
        self._client = httpx.AsyncClient(timeout=REQUEST_TIMEOUT)

    async def complete(
        self, request: SessionRequest, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> ModelTurn:
        payload = {
            "butler": request.butler,
            "session_id": request.session_id,
            "model": self._model,
            "system": request.system,
            "messages": messages,
            "tools": [t.to_json() for t in tools],
            "env": sorted(request.env),
        }
        try:
            response = await self._client.post(self._url, json=payload)
        except httpx.HTTPError as exc:
            raise ModelError(
                f"script server {self._url}: {exc.__class__.__name__}: {exc}"
            ) from None
        step = response.json()
        if step.get("delay"):
            await asyncio.sleep(float(step["delay"]))
        if response.status_code >= 400 or "error" in step:
            raise ModelError(
                str(step.get("error") or f"script server answered {response.status_code}")
            )
        usage = step.get("usage") or {}
        calls = tuple(
            ToolCall(raw.get("id") or f"call_{i}", raw["name"], dict(raw.get("arguments") or {}))
            for i, raw in enumerate(step.get("tool_calls") or [])
        )
        return ModelTurn(
            text=step.get("text") or "",
            tool_calls=calls,
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            cached_tokens=usage.get("cached_tokens"),
            cache_write_tokens=usage.get("cache_write_tokens"),
        )

    async def aclose(self) -> None:
        await self._client.aclose()
