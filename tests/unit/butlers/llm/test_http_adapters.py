"""The OpenAI-compatible and Anthropic adapters against fake endpoints, driving real tools."""

from __future__ import annotations

import json

import pytest

from butlers.daemon.calls import SessionToolServer
from butlers.llm.anthropic import AnthropicChatModel
from butlers.llm.loop import LoopRuntime
from butlers.llm.openai import OpenAIChatModel
from butlers.llm.toolbox import session_toolboxes
from butlers.llm.types import ModelError, SessionRequest, SessionTrace

REQUEST = SessionRequest(
    butler="health", session_id="s1", system="You are health.", prompt="Remember x=1", max_turns=5
)


def _runtime(model, server):  # type: ignore[no-untyped-def]
    return LoopRuntime(model, session_toolboxes(SessionToolServer(server), "health"), "m")


async def test_openai_adapter_runs_a_tool_call_then_answers(fake_endpoint, tiny_butler):
    fake_endpoint.replies = [
        (
            200,
            {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {
                                        "name": "remember",
                                        "arguments": '{"key": "x", "value": "1"}',
                                    },
                                }
                            ],
                        }
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 4},
            },
        ),
        (
            200,
            {
                "choices": [{"message": {"role": "assistant", "content": "Done."}}],
                "usage": {
                    "prompt_tokens": 20,
                    "completion_tokens": 2,
                    "prompt_tokens_details": {"cached_tokens": 8},
                },
            },
        ),
    ]
    model = OpenAIChatModel(base_url=fake_endpoint.url + "/v1", model="m", api_key="k-1", timeout=5)
    trace = SessionTrace()
    output = await _runtime(model, tiny_butler).run(REQUEST, trace)
    await model.aclose()
    assert output == "Done." and (trace.input_tokens, trace.output_tokens) == (31, 6)
    assert trace.tool_calls[0]["result"] == {"stored": "x"}
    # OpenAI's automatic cache: what a call read is recorded with it (no writes there).
    assert [(c.cached_tokens, c.cache_write_tokens) for c in trace.llm_calls] == [
        (None, None),
        (8, None),
    ]
    first, second = (r["body"] for r in fake_endpoint.requests)
    assert fake_endpoint.requests[0]["path"] == "/v1/chat/completions"
    assert fake_endpoint.requests[0]["headers"]["Authorization"] == "Bearer k-1"
    assert [t["function"]["name"] for t in first["tools"]] == ["remember"]
    assert first["messages"][0] == {"role": "system", "content": "You are health."}
    assert (
        second["messages"][-1]["role"] == "tool" and second["messages"][-1]["tool_call_id"] == "c1"
    )
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "remember"


async def test_openai_adapter_reports_an_error_status(fake_endpoint, tiny_butler):
    fake_endpoint.replies = [(500, {"error": "boom"})]
    model = OpenAIChatModel(base_url=fake_endpoint.url, model="m", api_key=None, timeout=5)
    with pytest.raises(ModelError, match="500"):
        await _runtime(model, tiny_butler).run(REQUEST, SessionTrace())
    await model.aclose()


async def test_anthropic_adapter_runs_a_tool_use_then_answers(fake_endpoint, tiny_butler):
    fake_endpoint.replies = [
        (
            200,
            {
                "content": [
                    {"type": "text", "text": "Let me store it."},
                    {
                        "type": "tool_use",
                        "id": "tu1",
                        "name": "remember",
                        "input": {"key": "x", "value": "1"},
                    },
                ],
                "usage": {
                    "input_tokens": 9,
                    "output_tokens": 3,
                    "cache_creation_input_tokens": 1100,
                },
            },
        ),
        (
            200,
            {
                "content": [{"type": "text", "text": "Stored."}],
                "usage": {"input_tokens": 15, "output_tokens": 1},
            },
        ),
    ]
    model = AnthropicChatModel(base_url=fake_endpoint.url, model="claude", api_key="ak", timeout=5)
    trace = SessionTrace()
    output = await _runtime(model, tiny_butler).run(REQUEST, trace)
    await model.aclose()
    assert output == "Stored." and (trace.input_tokens, trace.output_tokens) == (1124, 4)
    assert [(c.cached_tokens, c.cache_write_tokens) for c in trace.llm_calls] == [
        (None, 1100),
        (None, None),
    ]
    first, second = (r["body"] for r in fake_endpoint.requests)
    headers = fake_endpoint.requests[0]["headers"]
    assert fake_endpoint.requests[0]["path"] == "/v1/messages"
    assert headers["x-api-key"] == "ak" and headers["anthropic-version"]
    # The stable prefix (tools, then system) is marked for the prompt cache at its end.
    assert first["system"] == [
        {"type": "text", "text": "You are health.", "cache_control": {"type": "ephemeral"}}
    ]
    assert first["tools"][0]["name"] == "remember"
    assert second["system"] == first["system"] and second["tools"] == first["tools"]
    result_block = second["messages"][-1]["content"][0]
    assert (result_block["type"], result_block["tool_use_id"]) == ("tool_result", "tu1")
    assert second["messages"][-2]["content"][1]["type"] == "tool_use"
    # The second breakpoint is the end of the conversation so far: the first request
    # caches its whole prompt, the second reads it and marks its own end; the turns
    # both requests share are sent identically, the mark aside.
    assert first["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Remember x=1", "cache_control": {"type": "ephemeral"}}
            ],
        }
    ]
    assert second["messages"][0]["content"] == [{"type": "text", "text": "Remember x=1"}]
    assert result_block["cache_control"] == {"type": "ephemeral"}
    marks = json.dumps(second).count("cache_control")
    assert marks == 2  # the API allows four


async def test_anthropic_adapter_stops_marking_a_conversation_the_cache_ignores(
    fake_endpoint, tiny_butler
):
    # A prompt under the model's minimum is not cached: after a reply that read and
    # wrote nothing, the next request marks only its stable prefix, so it does not
    # write its whole prompt at the write rate for a request that may never follow.
    tool_use = {"type": "tool_use", "id": "tu1", "name": "remember", "input": {"key": "x"}}
    fake_endpoint.replies = [
        (200, {"content": [tool_use], "usage": {"input_tokens": 9, "output_tokens": 3}}),
        (200, {"content": [{"type": "text", "text": "Stored."}], "usage": {"input_tokens": 15}}),
    ]
    model = AnthropicChatModel(base_url=fake_endpoint.url, model="claude", api_key="ak", timeout=5)
    await _runtime(model, tiny_butler).run(REQUEST, SessionTrace())
    await model.aclose()
    first, second = (r["body"] for r in fake_endpoint.requests)
    assert json.dumps(first["messages"]).count("cache_control") == 1
    assert "cache_control" not in json.dumps(second["messages"])
    assert second["system"][0]["cache_control"] == {"type": "ephemeral"}
