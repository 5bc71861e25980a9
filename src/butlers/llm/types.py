"""The neutral vocabulary every runtime adapter speaks: tools, calls, turns, sessions.

Conversations are kept as plain dicts in one neutral shape, converted to each wire
format by its adapter:

    {"role": "user", "content": str}
    {"role": "assistant", "content": str | None, "tool_calls": [ToolCall.to_json()]}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


class SessionFailure(Exception):
    """A runtime failed (model error, bad response, turn limit); the session is an error."""


class ModelError(SessionFailure):
    """The model endpoint failed or answered something we cannot use."""


class TurnLimitExceeded(SessionFailure):
    """The model kept calling tools past the turn limit without a final answer."""


class ReplyTruncated(SessionFailure):
    """The model stopped at its output limit: its answer is cut off, not final."""


class TokenBudgetExceeded(SessionFailure):
    """The session used more tokens than its budget (spec.runtime.maxSessionTokens)."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    # Sent to the model only once it asks for it (`llm.offer`); never part of `to_json`.
    on_request: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # Why the model's arguments could not be read (not a JSON object); the call is then
    # not run, and the model is told this instead, so it can send them again.
    arguments_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ModelTurn:
    """One model reply: a final text, or tool calls to run first."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None  # input tokens the provider read from its prompt cache
    cache_write_tokens: int | None = None  # input tokens written to it (Anthropic bills more)
    # Set when the reply stopped at the output limit (OpenAI `finish_reason: "length"`,
    # Anthropic `stop_reason: "max_tokens"`): the reason, as the model server gave it.
    truncated: str | None = None


@dataclass(frozen=True)
class SessionRequest:
    butler: str
    session_id: str
    system: str
    prompt: str
    max_turns: int
    context: Any = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    # False: the session may call no tool at all (the switchboard's classifier).
    tools: bool = True
    # What the butler's memory recalled for this prompt (data, never instructions).
    recalled: str = ""


MAX_LLM_CALLS = 500  # model calls recorded per session (the turn limit is far below)


@dataclass(frozen=True)
class LlmCallRecord:
    """One model call: what was sent since the previous call and what came back.

    `request` and `response` are neutral JSON (the conversation's new messages, the
    reply's text and tool calls); the spawner redacts and bounds them before storing."""

    started_at: datetime
    duration_ms: float
    request: Any
    response: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    model: str | None = None
    error: str | None = None


@dataclass
class SessionTrace:
    """What a session did so far; survives a timeout or an error of the runtime."""

    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    llm_calls: list[LlmCallRecord] = field(default_factory=list)

    def add_llm_call(self, call: LlmCallRecord) -> None:
        if len(self.llm_calls) < MAX_LLM_CALLS:
            self.llm_calls.append(call)

    def add_usage(self, input_tokens: int | None, output_tokens: int | None) -> None:
        if input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + input_tokens
        if output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + output_tokens


class ChatModel(Protocol):
    """A model that answers a conversation, possibly with tool calls."""

    async def complete(
        self, request: SessionRequest, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> ModelTurn: ...

    async def aclose(self) -> None: ...


class SessionRuntime(Protocol):
    """Runs one whole session and returns its final output; records into `trace`."""

    model_name: str | None
    # True: the runtime records its tool calls into the trace itself; False: they reach
    # the butler over HTTP and the butler records them as they run (claude-code).
    records_tool_calls: bool

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str: ...

    async def aclose(self) -> None: ...


def first_user_text(request: SessionRequest) -> str:
    """The opening user message: the prompt, with the trigger context appended as JSON
    and what memory recalled after it (labelled as data)."""
    text = request.prompt
    if request.context is not None:
        text += f"\n\nContext:\n{json.dumps(request.context, ensure_ascii=False)}"
    if request.recalled:
        text += f"\n\n{request.recalled}"
    return text


async def post_model_request(client: Any, url: str, payload: dict[str, Any]) -> Any:
    """POST a model request; transport failures and HTTP errors become `ModelError`."""
    import httpx2 as httpx

    try:
        response = await client.post(url, json=payload)
    except httpx.HTTPError as exc:
        raise ModelError(f"{url}: {exc.__class__.__name__}: {exc}") from None
    if response.status_code >= 400:
        raise ModelError(f"{url} answered {response.status_code}: {response.text[:300]}")
    try:
        return response.json()
    except ValueError:
        raise ModelError(
            f"{url} answered something that is not JSON: {response.text[:300]}"
        ) from None
