"""What a real OpenAI-compatible server does with the requests the OpenAI adapter sends
(`--model-server`): each of issue 28's findings shown on the server itself, next to the
request the adapter sends instead. The unit tests (tests/unit/butlers/llm/
test_server_quirks.py) replay the same answers from a scripted endpoint.

Tests about llama-cpp-python's own behaviour skip against a server given in
BUTLERS_OPENAI_BASE_URL; the rest hold on any server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from butlers.llm.loop import run_agent_loop
from butlers.llm.openai import OpenAIChatModel, server_schema, to_openai_messages
from butlers.llm.types import (
    ReplyTruncated,
    SessionRequest,
    SessionTrace,
    TokenBudgetExceeded,
    ToolSpec,
)

from .harness.model_lane import external_model_url

pytestmark = pytest.mark.model_server

TIMEOUT = 60.0
# A tool whose arguments cannot run on: a boolean and an enum (llama.cpp's grammar for a
# free string is unbounded, and its tool-call branch ignores max_tokens).
SWITCH = ToolSpec(
    name="set_light",
    description="Turn the light on or off.",
    input_schema={
        "type": "object",
        "properties": {
            "on": {"type": "boolean"},
            "room": {"type": "string", "enum": ["kitchen", "hall"]},
        },
        "required": ["on", "room"],
    },
)


def _llama_cpp_only() -> None:
    if external_model_url(os.environ):
        pytest.skip("shows llama-cpp-python's own behaviour; another server is given")


def _request(prompt: str, system: str = "You are terse.") -> SessionRequest:
    return SessionRequest(butler="b", session_id="s", system=system, prompt=prompt, max_turns=2)


def _model(env: dict[str, str], **limits: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url=env["BUTLERS_OPENAI_BASE_URL"],
        model=env["BUTLERS_MODEL"],
        api_key=env["BUTLERS_OPENAI_API_KEY"],
        timeout=TIMEOUT,
        **limits,
    )


async def _post(env: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {env['BUTLERS_OPENAI_API_KEY']}"}
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
        return await http.post(
            env["BUTLERS_OPENAI_BASE_URL"] + "/chat/completions",
            json={"model": env["BUTLERS_MODEL"], **body},
        )


class _NoTools:
    async def list(self) -> list[ToolSpec]:
        return []

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        raise AssertionError("no tools here")


async def test_llama_cpp_shows_the_model_tools_only_with_tool_choice(
    model_server_env: dict[str, str],
) -> None:
    _llama_cpp_only()
    env = model_server_env
    messages = [{"role": "user", "content": "Turn on the kitchen light."}]
    model = _model(env, max_tokens=8, temperature=0.0)
    sent = model.payload(_request("Turn on the kitchen light."), messages, [SWITCH])
    await model.aclose()
    bare = {k: v for k, v in sent.items() if k not in {"tools", "tool_choice"}}
    without_choice = {k: v for k, v in sent.items() if k != "tool_choice"}

    async def prompt_tokens(body: dict[str, Any]) -> int:
        answer = await _post(env, body)
        assert answer.status_code == 200, answer.text
        return int(answer.json()["usage"]["prompt_tokens"])

    no_tools = await prompt_tokens(bare)
    # The tools without tool_choice: the server leaves them out of the prompt entirely.
    assert await prompt_tokens(without_choice) == no_tools
    # What the adapter sends: the tools are in the prompt the model reads.
    assert await prompt_tokens(sent) > no_tools + 40


async def test_llama_cpp_refuses_a_null_content_and_accepts_what_the_adapter_sends(
    model_server_env: dict[str, str],
) -> None:
    _llama_cpp_only()
    env = model_server_env
    # The loop's history after a tool call: an assistant turn without text.
    history = [
        {"role": "user", "content": "Turn on the kitchen light."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "set_light", "arguments": {"on": True}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
    ]
    wire = to_openai_messages("You are terse.", history)
    raw = [dict(m) for m in wire]
    raw[2]["content"] = None  # what the adapter sent before issue 28
    refused = await _post(env, {"messages": raw, "max_tokens": 4})
    assert refused.status_code == 500 and "valid string" in refused.text, refused.text
    accepted = await _post(env, {"messages": wire, "max_tokens": 4})
    assert accepted.status_code == 200, accepted.text


async def test_a_reply_cut_at_max_tokens_is_an_error_and_still_counted(
    model_server_env: dict[str, str],
) -> None:
    model = _model(model_server_env, max_tokens=16, temperature=0.0)
    trace = SessionTrace()
    request = _request("Write a 2000-word essay about the history of tea, with headings.")
    with pytest.raises(ReplyTruncated, match=r"maxTokens.*finish_reason=length"):
        await run_agent_loop(model, _NoTools(), request, trace)
    await model.aclose()
    assert trace.output_tokens == 16 and (trace.input_tokens or 0) > 0
    assert trace.llm_calls and trace.llm_calls[0].response is not None


async def test_a_session_past_its_token_budget_stops_on_a_real_reply(
    model_server_env: dict[str, str],
) -> None:
    model = _model(model_server_env, max_tokens=16, temperature=0.0)
    trace = SessionTrace()
    request = _request("Say yes.", system="You answer in one word. " * 40)
    with pytest.raises(TokenBudgetExceeded, match=r"over its budget of 256"):
        await run_agent_loop(model, _NoTools(), request, trace, max_session_tokens=256)
    await model.aclose()
    assert (trace.input_tokens or 0) > 256


async def test_llama_cpp_tool_grammars_take_the_schemas_the_adapter_sends(
    model_server_env: dict[str, str],
) -> None:
    """A length bound becomes a grammar repetition: llama.cpp builds one rule per
    allowed character. The adapter leaves such keywords out (the butler still checks
    every argument); what it sends becomes a grammar at once."""
    _llama_cpp_only()
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 50_000}, "on": {"type": "boolean"}},
        "required": ["on"],
    }
    sent = server_schema(schema)
    tool = {"type": "function", "function": {"name": "note", "parameters": sent}}
    answer = await _post(
        model_server_env,
        {
            "messages": [{"role": "user", "content": "Take a note."}],
            "tools": [tool],
            "tool_choice": {"type": "function", "function": {"name": "note"}},
            "max_tokens": 32,
        },
    )
    assert answer.status_code == 200, answer.text
    (call,) = answer.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "note"


async def test_a_long_max_length_kills_llama_cpp_s_server(
    model_server_env: dict[str, str], tmp_path: Path
) -> None:
    """What the adapter's schemas avoid, on a server of its own (it does not survive)."""
    _llama_cpp_only()
    from tests.support.model_server import running_server

    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 50_000}}}
    tool = {"type": "function", "function": {"name": "note", "parameters": schema}}
    body = {
        "messages": [{"role": "user", "content": "Take a note."}],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "note"}},
        "max_tokens": 32,
    }
    with running_server(tmp_path) as server:
        env = {**model_server_env, "BUTLERS_OPENAI_BASE_URL": server.base_url}
        with pytest.raises(httpx.TransportError):
            await _post(env, body)
