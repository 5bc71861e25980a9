"""A session's tool offer: the butler's own tools with every request, the shared ones
(memory, reminders, the state store) named by `load_tools` and sent once loaded, the
operator's tools never; driven through the agent loop against a fake OpenAI endpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastmcp import FastMCP

from butlers.auth.access import access_meta
from butlers.auth.middleware import AccessMiddleware
from butlers.daemon.calls import SessionToolServer
from butlers.llm.loop import LoopRuntime
from butlers.llm.offer import LOAD_TOOLS, OFFER, ON_REQUEST, ToolOffer, is_on_request
from butlers.llm.openai import OpenAIChatModel
from butlers.llm.toolbox import session_toolboxes
from butlers.llm.types import SessionRequest, SessionTrace, ToolSpec

REQUEST = SessionRequest(
    butler="health", session_id="s1", system="You are health.", prompt="Log 80 kg", max_turns=5
)
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def _spec(name: str, on_request: bool = False) -> ToolSpec:
    return ToolSpec(name, f"{name} things", SCHEMA, on_request=on_request)


def test_tiers_come_from_the_module_then_the_tool() -> None:
    tiers = {"memory": ON_REQUEST, "reminders": "offered"}
    assert is_on_request({"module": "memory"}, tiers)
    assert not is_on_request({"module": "health"}, tiers)
    # A butler's setting for the module wins over a tool's own declaration.
    assert not is_on_request({"module": "reminders", OFFER: ON_REQUEST}, tiers)
    assert is_on_request({"module": "core", OFFER: ON_REQUEST}, tiers)  # state tools
    assert not is_on_request({"module": "core"}, tiers)


def test_the_offer_names_what_waits_and_loads_it_once() -> None:
    offer = ToolOffer([_spec("measurement_log"), _spec("remind", True), _spec("state_get", True)])
    assert [t.name for t in offer.tools] == ["measurement_log", LOAD_TOOLS]
    loader = offer.tools[1].input_schema["properties"]["names"]["items"]
    assert loader["enum"] == ["remind", "state_get"]
    assert offer.handles(LOAD_TOOLS) and not offer.handles("remind")
    value, text, is_error = offer.load({"names": ["remind", "remind"]})
    assert not is_error and value == {"loaded": ["remind"], "already_offered": []}
    assert "remind" in text
    assert [t.name for t in offer.tools] == ["measurement_log", LOAD_TOOLS, "remind"]
    assert not offer.tools[-1].on_request  # sent as any offered tool is
    again, _, is_error = offer.load({"names": ["remind"]})
    assert not is_error and again == {"loaded": [], "already_offered": ["remind"]}
    assert len(offer.tools) == 3


@pytest.mark.parametrize(
    ("arguments", "says"),
    [({"names": ["nope"]}, "nope"), ({}, "needs names"), ({"names": [1]}, "needs names")],
)
def test_a_bad_load_says_what_can_be_loaded(arguments: dict[str, Any], says: str) -> None:
    offer = ToolOffer([_spec("measurement_log"), _spec("remind", True)])
    _, text, is_error = offer.load(arguments)
    assert is_error and says in text and "remind" in text
    assert [t.name for t in offer.tools] == ["measurement_log", LOAD_TOOLS]


def test_without_anything_on_request_there_is_no_loader() -> None:
    offer = ToolOffer([_spec("measurement_log")])
    assert [t.name for t in offer.tools] == ["measurement_log"]
    assert not offer.handles(LOAD_TOOLS)


def test_a_butler_tool_named_load_tools_is_never_shadowed() -> None:
    offer = ToolOffer([_spec(LOAD_TOOLS), _spec("remind", True)])
    assert [t.name for t in offer.tools] == [LOAD_TOOLS, "remind"]
    assert not offer.handles(LOAD_TOOLS)


@pytest.fixture
async def butler() -> FastMCP:
    """A health butler's tiers: its own tool, a shared one on request, an operator's."""
    mcp = FastMCP("health")
    access = AccessMiddleware()
    mcp.add_middleware(access)

    @mcp.tool(meta={"module": "health"})
    async def measurement_log(value: float) -> dict[str, Any]:
        """Record a measurement."""
        return {"logged": value}

    @mcp.tool(meta={"module": "reminders"})
    async def remind(text: str) -> dict[str, Any]:
        """Remind the owner."""
        return {"reminder": text}

    @mcp.tool(meta={"module": "core"} | access_meta(operator=True))
    async def sessions_list() -> list[str]:
        """The session log."""
        return []

    access.install(await mcp.list_tools())
    return mcp


def _reply(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> tuple[int, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ]
    return 200, {"choices": [{"message": message}], "usage": {"prompt_tokens": 1}}


def _runtime(model: OpenAIChatModel, mcp: FastMCP) -> LoopRuntime:
    server = SessionToolServer(mcp, {"health": "offered", "reminders": ON_REQUEST})
    return LoopRuntime(model, session_toolboxes(server, "health"), "m")


def _sent(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


async def test_a_session_loads_a_shared_tool_then_calls_it(fake_endpoint, butler) -> None:
    fake_endpoint.replies = [
        _reply((LOAD_TOOLS, {"names": ["remind"]})),
        _reply(("remind", {"text": "stretch"})),
        _reply(text="Done."),
    ]
    model = OpenAIChatModel(base_url=fake_endpoint.url, model="m", api_key=None, timeout=5)
    trace = SessionTrace()
    output = await _runtime(model, butler).run(REQUEST, trace)
    await model.aclose()
    first, second, third = (r["body"] for r in fake_endpoint.requests)
    assert output == "Done."
    # The operator's tool is never sent; the shared one only once loaded.
    assert _sent(first) == ["measurement_log", LOAD_TOOLS]
    assert _sent(second) == _sent(third) == ["measurement_log", LOAD_TOOLS, "remind"]
    loader = first["tools"][1]["function"]["parameters"]["properties"]["names"]["items"]
    assert loader["enum"] == ["remind"]
    assert [c["name"] for c in trace.tool_calls] == [LOAD_TOOLS, "remind"]
    assert trace.tool_calls[1]["result"] == {"reminder": "stretch"}
    # The session's record says which tools each call carried, when they changed.
    recorded = [call.request.get("tools") for call in trace.llm_calls]
    assert recorded == [["measurement_log", LOAD_TOOLS], _sent(second), None]


async def test_a_shared_tool_called_without_loading_still_runs(fake_endpoint, butler) -> None:
    fake_endpoint.replies = [_reply(("remind", {"text": "stretch"})), _reply(text="Done.")]
    model = OpenAIChatModel(base_url=fake_endpoint.url, model="m", api_key=None, timeout=5)
    trace = SessionTrace()
    await _runtime(model, butler).run(REQUEST, trace)
    await model.aclose()
    assert trace.tool_calls[0]["result"] == {"reminder": "stretch"}
    assert not trace.tool_calls[0]["is_error"]


async def test_an_operator_tool_is_refused_to_a_session(fake_endpoint, butler) -> None:
    fake_endpoint.replies = [_reply(("sessions_list", {})), _reply(text="Could not.")]
    model = OpenAIChatModel(base_url=fake_endpoint.url, model="m", api_key=None, timeout=5)
    trace = SessionTrace()
    await _runtime(model, butler).run(REQUEST, trace)
    await model.aclose()
    assert trace.tool_calls[0]["is_error"]
    assert "not available in this session" in trace.tool_calls[0]["result"]
