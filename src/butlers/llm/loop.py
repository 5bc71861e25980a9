"""The agent loop shared by every HTTP model adapter: list tools, let the model call
them, feed results back, stop at a final answer or at the turn limit. The tools a
request carries are the session's offer (`llm.offer`): the butler's own tools, and
the shared ones once the model loads them."""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from butlers.llm.offer import ToolOffer
from butlers.llm.types import (
    ChatModel,
    LlmCallRecord,
    ModelTurn,
    ReplyTruncated,
    SessionRequest,
    SessionTrace,
    TokenBudgetExceeded,
    ToolCall,
    ToolSpec,
    TurnLimitExceeded,
    first_user_text,
)


class Toolbox(Protocol):
    """The tools one session may see and call (one butler's own, nothing else)."""

    async def list(self) -> list[ToolSpec]: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str, bool]:
        """(result value, result text for the model, is_error)."""
        ...


def _check_budget(trace: SessionTrace, budget: int | None) -> None:
    used = (trace.input_tokens or 0) + (trace.output_tokens or 0)
    if budget is not None and used > budget:
        raise TokenBudgetExceeded(
            f"the session used {used} tokens, over its budget of {budget} "
            "(spec.runtime.maxSessionTokens)"
        )


async def _run_call(toolbox: Toolbox, offer: ToolOffer, call: ToolCall) -> tuple[Any, str, bool]:
    if call.arguments_error is not None:
        # Not run: the model is told why, and may send the call again within its turns.
        text = f"{call.arguments_error}; call the tool again with a valid JSON object"
        return text, text, True
    if offer.handles(call.name):
        return offer.load(call.arguments)
    return await toolbox.call(call.name, call.arguments)


async def run_agent_loop(
    model: ChatModel,
    toolbox: Toolbox,
    request: SessionRequest,
    trace: SessionTrace,
    *,
    max_session_tokens: int | None = None,
) -> str:
    offer = ToolOffer(await toolbox.list())
    messages: list[dict[str, Any]] = [{"role": "user", "content": first_user_text(request)}]
    sent = 0  # messages already sent in an earlier call (recorded there)
    recorded: list[str] | None = None  # the tool names the last recorded call listed
    for _turn in range(request.max_turns):
        tools = offer.tools
        names = [t.name for t in tools]
        reply = await _complete(
            model, request, messages, sent, tools, trace, record_tools=names != recorded
        )
        recorded = names
        sent = len(messages)
        trace.add_usage(reply.input_tokens, reply.output_tokens)
        if reply.truncated:
            raise ReplyTruncated(
                f"the model's reply was cut off at its output limit "
                f"(spec.runtime.maxTokens; the server said {reply.truncated})"
            )
        _check_budget(trace, max_session_tokens)
        if not reply.tool_calls:
            return reply.text
        messages.append(
            {
                "role": "assistant",
                "content": reply.text or None,
                "tool_calls": [call.to_json() for call in reply.tool_calls],
            }
        )
        for call in reply.tool_calls:
            started_at = datetime.now(UTC)
            started = time.perf_counter()
            value, text, is_error = await _run_call(toolbox, offer, call)
            trace.tool_calls.append(
                {
                    "name": call.name,
                    "arguments": call.arguments,
                    "result": value,
                    "is_error": is_error,
                    "started_at": started_at.isoformat(),
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": text,
                    "is_error": is_error,
                }
            )
    raise TurnLimitExceeded(
        f"no final answer after {request.max_turns} turns (spec.runtime.maxTurns)"
    )


async def _complete(
    model: ChatModel,
    request: SessionRequest,
    messages: list[dict[str, Any]],
    sent: int,
    tools: list[ToolSpec],
    trace: SessionTrace,
    *,
    record_tools: bool,
) -> ModelTurn:
    """One model call, recorded in `trace` whether it answers or fails (with the system
    prompt on the first call, and the tool names whenever they changed)."""
    sent_now: dict[str, Any] = {"messages": messages[sent:], "message_count": len(messages)}
    if sent == 0:
        sent_now["system"] = request.system
    if record_tools:
        sent_now["tools"] = [t.name for t in tools]
    started_at = datetime.now(UTC)
    started = time.perf_counter()

    def record(reply: ModelTurn | None, error: str | None) -> None:
        duration = round((time.perf_counter() - started) * 1000, 3)
        if reply is None:
            trace.add_llm_call(LlmCallRecord(started_at, duration, sent_now, error=error))
            return
        calls = [call.to_json() for call in reply.tool_calls]
        trace.add_llm_call(
            LlmCallRecord(
                started_at=started_at,
                duration_ms=duration,
                request=sent_now,
                response={"text": reply.text, "tool_calls": calls},
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cached_tokens=reply.cached_tokens,
                cache_write_tokens=reply.cache_write_tokens,
            )
        )

    try:
        reply = await model.complete(request, messages, tools)
    except asyncio.CancelledError:
        record(None, "cancelled")
        raise
    except Exception as exc:
        record(None, f"{exc.__class__.__name__}: {exc}")
        raise
    record(reply, None)
    return reply


class LoopRuntime:
    """A `SessionRuntime` made of a chat model and a toolbox: the HTTP adapters."""

    records_tool_calls = True  # the loop records every call it makes (see SessionRuntime)

    def __init__(
        self,
        model: ChatModel,
        open_toolbox: Any,
        model_name: str | None,
        *,
        max_session_tokens: int | None = None,
    ) -> None:
        self._model = model
        self._max_session_tokens = max_session_tokens
        # (session_id, *, tools) -> async context manager yielding a Toolbox
        self._open_toolbox = open_toolbox
        self.model_name = model_name

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str:
        toolbox_cm: AbstractAsyncContextManager[Toolbox] = self._open_toolbox(
            request.session_id, tools=request.tools
        )
        async with toolbox_cm as toolbox:
            return await run_agent_loop(
                self._model, toolbox, request, trace, max_session_tokens=self._max_session_tokens
            )

    async def aclose(self) -> None:
        await self._model.aclose()
