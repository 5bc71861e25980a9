"""What real OpenAI-compatible servers and weak models do, against fake endpoints that
answer as they do: the request a strict server accepts, cut-off replies, arguments that
are not JSON, and the session's token budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from butlers.daemon.calls import SessionToolServer
from butlers.llm.anthropic import AnthropicChatModel
from butlers.llm.loop import LoopRuntime
from butlers.llm.openai import OpenAIChatModel, server_schema
from butlers.llm.toolbox import session_toolboxes
from butlers.llm.types import (
    ReplyTruncated,
    SessionRequest,
    SessionTrace,
    TokenBudgetExceeded,
    TurnLimitExceeded,
)

REQUEST = SessionRequest(
    butler="health", session_id="s1", system="You are health.", prompt="Remember x=1", max_turns=3
)


def _runtime(model: Any, server: Any, budget: int | None = None) -> LoopRuntime:
    toolboxes = session_toolboxes(SessionToolServer(server), "health")
    return LoopRuntime(model, toolboxes, "m", max_session_tokens=budget)


def _openai(endpoint: Any, **limits: Any) -> OpenAIChatModel:
    return OpenAIChatModel(base_url=endpoint.url, model="m", api_key=None, timeout=5, **limits)


def _call(arguments: str, finish: str = "tool_calls") -> tuple[int, dict[str, Any]]:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "remember", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    return 200, {"choices": [{"message": message, "finish_reason": finish}], "usage": usage}


def _text(text: str, finish: str = "stop") -> tuple[int, dict[str, Any]]:
    message = {"role": "assistant", "content": text}
    usage = {"prompt_tokens": 120, "completion_tokens": 5}
    return 200, {"choices": [{"message": message, "finish_reason": finish}], "usage": usage}


async def test_the_request_carries_limits_tool_choice_and_a_string_content(
    fake_endpoint, tiny_butler
):
    fake_endpoint.replies = [_call('{"key": "x", "value": "1"}'), _text("Done.")]
    model = _openai(fake_endpoint, max_tokens=256, temperature=0.0)
    assert await _runtime(model, tiny_butler).run(REQUEST, SessionTrace()) == "Done."
    await model.aclose()
    first, second = (r["body"] for r in fake_endpoint.requests)
    assert (first["tool_choice"], first["max_tokens"], first["temperature"]) == ("auto", 256, 0.0)
    assistant = second["messages"][-2]
    assert assistant["role"] == "assistant" and assistant["content"] == ""


async def test_no_tools_means_no_tool_choice_and_no_temperature_when_unset(fake_endpoint):
    fake_endpoint.replies = [_text("general")]
    model = _openai(fake_endpoint)
    trace = SessionTrace()
    request = SessionRequest(butler="b", session_id="s", system="", prompt="p", max_turns=1)
    runtime = LoopRuntime(model, _no_tools, "m")
    assert await runtime.run(request, trace) == "general"
    await model.aclose()
    body = fake_endpoint.requests[0]["body"]
    assert not body.keys() & {"tools", "tool_choice", "temperature", "max_tokens"}


async def test_a_reply_cut_at_the_length_limit_is_an_error_with_its_reason(
    fake_endpoint, tiny_butler
):
    fake_endpoint.replies = [_text("x" * 500, finish="length")]
    model = _openai(fake_endpoint, max_tokens=16)
    trace = SessionTrace()
    with pytest.raises(ReplyTruncated, match=r"maxTokens.*finish_reason=length"):
        await _runtime(model, tiny_butler).run(REQUEST, trace)
    await model.aclose()
    assert (trace.input_tokens, trace.output_tokens) == (120, 5)  # still counted


async def test_arguments_that_are_not_json_go_back_to_the_model_as_a_tool_error(
    fake_endpoint, tiny_butler
):
    fake_endpoint.replies = [
        _call('{"key": "x", "value": '),
        _call('{"key": "x", "value": "line one\nline two"}'),  # a raw newline: accepted
        _text("Stored."),
    ]
    model = _openai(fake_endpoint)
    trace = SessionTrace()
    assert await _runtime(model, tiny_butler).run(REQUEST, trace) == "Stored."
    await model.aclose()
    refused, stored = trace.tool_calls
    assert refused["is_error"] and "not valid JSON" in refused["result"]
    assert not stored["is_error"] and stored["result"] == {"stored": "x"}
    told = fake_endpoint.requests[1]["body"]["messages"][-1]
    assert told["role"] == "tool" and "call the tool again" in told["content"]


async def test_a_model_that_never_sends_valid_arguments_stops_at_the_turn_limit(
    fake_endpoint, tiny_butler
):
    fake_endpoint.replies = [_call("[1, 2]"), _call("not json"), _call("{")]
    model = _openai(fake_endpoint)
    trace = SessionTrace()
    with pytest.raises(TurnLimitExceeded):
        await _runtime(model, tiny_butler).run(REQUEST, trace)
    await model.aclose()
    assert [c["is_error"] for c in trace.tool_calls] == [True, True, True]
    assert "must be a JSON object, got list" in trace.tool_calls[0]["result"]


async def test_a_session_past_its_token_budget_stops(fake_endpoint, tiny_butler):
    fake_endpoint.replies = [
        _call('{"key": "x", "value": "1"}'),
        _call('{"key": "y", "value": "2"}'),
    ]
    model = _openai(fake_endpoint)
    trace = SessionTrace()
    with pytest.raises(TokenBudgetExceeded, match=r"220 tokens, over its budget of 200"):
        await _runtime(model, tiny_butler, budget=200).run(REQUEST, trace)
    await model.aclose()
    assert len(trace.tool_calls) == 1  # the second reply's calls never ran


async def test_anthropic_stop_at_max_tokens_is_an_error(fake_endpoint, tiny_butler):
    body = {
        "content": [{"type": "text", "text": "cut"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 9, "output_tokens": 32},
    }
    fake_endpoint.replies = [(200, body)]
    model = AnthropicChatModel(
        base_url=fake_endpoint.url,
        model="c",
        api_key="k",
        timeout=5,
        max_tokens=32,
        temperature=0.5,
    )
    with pytest.raises(ReplyTruncated, match="stop_reason=max_tokens"):
        await _runtime(model, tiny_butler).run(REQUEST, SessionTrace())
    await model.aclose()
    sent = fake_endpoint.requests[0]["body"]
    assert (sent["max_tokens"], sent["temperature"]) == (32, 0.5)


def test_server_schemas_drop_grammar_bounds_but_keep_properties_so_named():
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "maxLength": 100000, "pattern": "^a"},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 8},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
        },
        "required": ["pattern"],
    }
    sent = json.dumps(server_schema(schema))
    for keyword in ('"maxLength"', '"minLength"', '"maxItems"', '"format"', '"^a"'):
        assert keyword not in sent
    assert server_schema(schema)["properties"]["pattern"] == {"type": "string"}
    assert server_schema(schema)["required"] == ["pattern"]


class _NoTools:
    async def list(self) -> list[Any]:
        return []

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        raise AssertionError("no tools here")


class _no_tools:
    def __init__(self, session_id: str, *, tools: bool = True) -> None:
        pass

    async def __aenter__(self) -> _NoTools:
        return _NoTools()

    async def __aexit__(self, *exc: object) -> None:
        return None
