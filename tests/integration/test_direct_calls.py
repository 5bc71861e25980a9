"""The direct `tools/call` path answers exactly what the MCP SDK's path answers, in a 2025
session and as a stateless 2026-07-28 request, and never lets a session's call through
for a credential that did not open it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx2 as httpx
import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import default_serializer
from pydantic import BaseModel, PlainSerializer

from butlers import jsoncodec
from butlers.auth.http import HostPolicy
from butlers.auth.tokens import TokenBook, digest, new_user_token
from butlers.daemon.calls import PlainResult, caller_of
from butlers.daemon.direct import DirectToolCalls, _shape_result
from butlers.daemon.guard import ArgumentGuard
from butlers.daemon.http import build_http_app
from butlers.daemon.http_limits import SESSION_IDLE_TIMEOUT
from butlers.daemon.server import install_schema_lookup
from butlers.jsonutil import AnyJson, EncodedJson
from tests.support import raw_mcp
from tests.support.raw_mcp import decode
from tests.support.serving import served_asgi

TOKEN, OTHER = new_user_token(), new_user_token()
SESSION_VERSION, MODERN_VERSION = "2025-11-25", "2026-07-28"
ACCEPT = "application/json, text/event-stream"


Tagged = PlainSerializer(lambda value: {"tagged": value})


class Record(BaseModel):
    name: str
    tags: tuple[str, ...] = ()


def _server() -> FastMCP:
    mcp = FastMCP("t")
    mcp.add_middleware(ArgumentGuard())

    @mcp.tool
    async def echo(text: str, times: int = 1) -> dict[str, Any]:
        return {"text": text * times}

    @mcp.tool
    def words(text: str) -> list[str]:
        return text.split()

    @mcp.tool
    async def refuse() -> str:
        raise ToolError("refused, as asked")

    @mcp.tool
    async def broken() -> str:
        raise RuntimeError("a bug")

    @mcp.tool
    async def same(value: AnyJson) -> AnyJson:
        return value

    @mcp.tool
    async def encoded(value: dict[str, AnyJson]) -> AnyJson:
        """`same`, its text made by the tool (`EncodedJson`)."""
        return EncodedJson(value, default_serializer(value))

    @mcp.tool
    async def untyped(value):  # type: ignore[no-untyped-def]  # no output schema
        return value

    @mcp.tool
    async def big() -> AnyJson:  # past 64 bits: kept exact, as JSONB keeps them
        return {"n": 2**70, "m": [-(2**80), 2**64 + 1]}

    @mcp.tool
    def nothing() -> None:
        return None

    @mcp.tool
    async def record(name: str) -> Record:
        return Record(name=name, tags=("a", "b"))

    @mcp.tool
    async def as_object(value: AnyJson) -> dict[str, Any]:
        return value  # type: ignore[return-value]  # a list here is refused by FastMCP

    @mcp.tool
    async def number(text: str) -> float:
        return float(text)

    @mcp.tool
    async def numbers(value: AnyJson) -> set[int]:
        return value  # type: ignore[return-value]  # serialized as the annotation says

    @mcp.tool
    async def serialized(value: AnyJson) -> Annotated[dict[str, Any], Tagged]:
        return {"value": value}

    @mcp.tool
    async def bad_model() -> str:
        Record.model_validate({"name": 1})
        return "unreachable"

    @mcp.tool
    async def nap(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "rested"

    @mcp.tool
    async def slow() -> str:
        SLOW.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            SLOW.cancelled.set()
            raise
        return "done"

    return mcp


class _Slow:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()


SLOW = _Slow()


@contextlib.asynccontextmanager
async def _serving(
    direct: bool, idle_timeout: float = SESSION_IDLE_TIMEOUT
) -> AsyncIterator[tuple[str, Any]]:
    mcp = _server()
    await install_schema_lookup(mcp)
    app = build_http_app(
        mcp,
        "t",
        _ready,
        book=TokenBook(user_digests={digest(TOKEN): "user", digest(OTHER): "other"}),
        hosts=HostPolicy(),
        session_idle_timeout=idle_timeout,
        direct_calls=direct,
    )
    async with served_asgi(app) as base:
        yield f"{base}/mcp", app


async def _ready() -> tuple[bool, dict[str, object]]:
    return True, {}


def _direct_path(app: Any) -> DirectToolCalls:
    layer = app.middleware_stack
    while not isinstance(layer, DirectToolCalls):
        layer = layer.app
    return layer


async def _open(http: httpx.AsyncClient, url: str, token: str) -> str:
    return await raw_mcp.open_session(http, url, token, SESSION_VERSION)


def _in_session(session: str, token: str) -> dict[str, str]:
    """The headers of a request in the 2025 session `session`, sent with `token`."""
    return raw_mcp.headers(token, session, version=SESSION_VERSION)


# Results of every JSON kind, as a tool returns them.
VALUES: list[Any] = [
    None,
    {"a": 1, "b": [True, False, None], "c": {"d": "e"}},
    {},
    [1, "two", 3.5, {"x": None}],
    [],
    0,
    -(2**63),
    2**64 + 1,
    12345678901234567890123,
    0.1,
    1e-7,
    -2.5e300,
    "",
    "plain",
    'ünïcödé ✓ 😀 \u2028 " \\ \n',
    {"ключ": "значение", "emoji 😀": ["✓"]},
    True,
]

CALLS = [
    ("echo", {"text": "ab", "times": 2}),
    ("words", {"text": "one two"}),
    ("echo", {"text": "a\u0000b"}),  # the argument guard
    ("echo", {"times": 2}),  # a missing argument
    ("echo", {"text": "x", "times": "many"}),  # a wrong type
    ("refuse", {}),
    ("broken", {}),
    ("missing", {}),
    *[("same", {"value": value}) for value in VALUES],
    *[("untyped", {"value": value}) for value in VALUES],
    *[("encoded", {"value": value}) for value in VALUES if isinstance(value, dict)],
    ("nothing", {}),
    ("big", {}),
    ("record", {"name": "ünï"}),
    ("as_object", {"value": [1]}),
    ("as_object", {"value": {"k": [1, 2.5]}}),
    ("number", {"text": "0.1"}),
    ("number", {"text": "1e300"}),
    ("number", {"text": "nan"}),
    ("numbers", {"value": [3, 1, 3]}),
    ("serialized", {"value": [1, "x"]}),
    ("bad_model", {}),
]


async def _answers(direct: bool, era: str) -> tuple[list[dict[str, Any]], int]:
    async with _serving(direct) as (url, app), httpx.AsyncClient(timeout=10) as http:
        headers = raw_mcp.headers(TOKEN)
        if era == "2025":
            headers = _in_session(await _open(http, url, TOKEN), TOKEN)
        answers = []
        for ident, (name, arguments) in enumerate(CALLS, start=1):
            params: dict[str, Any] = {"name": name, "arguments": arguments}
            extra = {}
            if era == "2026":
                params["_meta"] = {
                    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
                extra = {
                    "MCP-Protocol-Version": MODERN_VERSION,
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": name,
                }
            body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
            response = await http.post(url, content=json.dumps(body), headers=headers | extra)
            assert response.status_code == 200, response.text
            answers.append(decode(response))
        answered = _direct_path(app).answered if direct else 0
    return answers, answered


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_the_direct_path_answers_as_the_sdk_does(era: str) -> None:
    through_sdk, _ = await _answers(direct=False, era=era)
    direct, answered = await _answers(direct=True, era=era)
    assert answered == len(CALLS)
    assert direct == through_sdk
    assert direct[0]["result"]["structuredContent"] == {"text": "abab"}
    assert "NUL character" in direct[2]["result"]["content"][0]["text"]
    # A result with its text made by the tool answers as the same value returned plainly.
    by_call = {
        json.dumps(c, sort_keys=True): a["result"] for c, a in zip(CALLS, direct, strict=True)
    }
    for value in (v for v in VALUES if isinstance(v, dict)):
        plain = by_call[json.dumps(("same", {"value": value}), sort_keys=True)]
        assert by_call[json.dumps(("encoded", {"value": value}), sort_keys=True)] == plain


async def test_a_session_is_not_used_with_another_credential() -> None:
    async with _serving(direct=True) as (url, app), httpx.AsyncClient(timeout=10) as http:
        session = await _open(http, url, TOKEN)
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}},
        }
        headers = _in_session(session, OTHER)
        response = await http.post(url, json=body, headers=headers)
        assert response.status_code == 404
        assert _direct_path(app).answered == 0


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
async def test_the_official_sdk_client_is_answered_directly(mode: str) -> None:
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        _serving(direct=True) as (url, app),
        httpx.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        result = await client.call_tool("echo", {"text": "ab", "times": 2})
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert client.protocol_version == (SESSION_VERSION if mode == "legacy" else mode)
        assert _direct_path(app).answered == 1
    assert not result.is_error and result.structured_content == {"text": "abab"}
    assert {"echo", "words", "refuse", "broken"} <= names


async def test_the_fastmcp_client_is_answered_directly() -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    async with _serving(direct=True) as (url, app):
        transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {TOKEN}"})
        async with Client(transport, timeout=10) as client:
            result = await client.call_tool("words", {"text": "one two"})
        assert _direct_path(app).answered == 1
    assert result.data == ["one", "two"]


async def test_a_session_call_is_cancelled_by_the_clients_notification() -> None:
    SLOW.__init__()
    async with _serving(direct=True) as (url, _app), httpx.AsyncClient(timeout=10) as http:
        session = await _open(http, url, TOKEN)
        headers = _in_session(session, TOKEN)
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow"}}
        call = asyncio.create_task(http.post(url, json=body, headers=headers))
        await asyncio.wait_for(SLOW.started.wait(), 5)
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "changed my mind"},
        }
        assert (await http.post(url, json=note, headers=headers)).status_code == 202
        answer = decode(await asyncio.wait_for(call, 5))
    assert answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32800, "message": "Request cancelled"},
    }
    assert SLOW.cancelled.is_set()


async def test_a_session_outlives_its_idle_timeout_during_a_call_and_idles_out_after() -> None:
    """The SDK's idle timer is held while a direct call runs, and armed again after it."""
    idle = 0.4
    async with (
        _serving(direct=True, idle_timeout=idle) as (url, app),
        httpx.AsyncClient(timeout=10) as http,
    ):
        session = await _open(http, url, TOKEN)
        headers = _in_session(session, TOKEN)

        async def nap(ident: int, seconds: float) -> httpx.Response:
            call = {"name": "nap", "arguments": {"seconds": seconds}}
            body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": call}
            return await http.post(url, json=body, headers=headers)

        answer = decode(await nap(1, 3 * idle))
        assert answer["result"]["structuredContent"] == {"result": "rested"}
        # Right after a call three idle timeouts long, the session is still there ...
        assert (await nap(2, 0)).status_code == 200
        assert _direct_path(app).answered == 2
        # ... and, left alone after a call, it idles out. The probes are direct calls too
        # (the SDK arms the timer after each request it answers itself).
        deadline = asyncio.get_running_loop().time() + 10
        while (await nap(3, 0)).status_code != 404:
            assert asyncio.get_running_loop().time() < deadline, "the idle timer was not armed"
            await asyncio.sleep(3 * idle)


async def test_a_stateless_call_is_cancelled_when_its_client_goes_away() -> None:
    SLOW.__init__()
    async with _serving(direct=True) as (url, _app):
        headers = {
            "Accept": ACCEPT,
            "Content-Type": "application/json",
            "Authorization": f"Bearer {TOKEN}",
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "slow",
        }
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {}, "_meta": meta},
        }
        async with httpx.AsyncClient(timeout=10) as http:
            call = asyncio.create_task(http.post(url, json=body, headers=headers))
            await asyncio.wait_for(SLOW.started.wait(), 5)
            call.cancel()  # closes the connection
            with contextlib.suppress(asyncio.CancelledError):
                await call
        await asyncio.wait_for(SLOW.cancelled.wait(), 5)


async def test_what_the_direct_path_cannot_read_is_answered_by_the_sdk() -> None:
    async with _serving(direct=True) as (url, app), httpx.AsyncClient(timeout=10) as http:
        headers = {
            "Accept": ACCEPT,
            "Content-Type": "application/json",
            "Authorization": f"Bearer {TOKEN}",
            "MCP-Protocol-Version": MODERN_VERSION,
        }
        deep = "[" * 5000 + "1" * 20 + "]" * 5000  # read by the standard library: too deep
        for body in (b"{not json", deep.encode(), b'{"n": 1' + b"0" * 30 + b", "):
            response = await http.post(url, content=body, headers=headers)
            assert response.status_code == 400, response.text
        assert _direct_path(app).answered == 0


@pytest.mark.parametrize("version", [SESSION_VERSION, "2024-11-05", MODERN_VERSION])
async def test_plain_results_go_on_the_wire_as_fastmcps_conversion_puts_them(
    version: str,
) -> None:
    """The same bytes as FastMCP's `tool._run` (`convert_result`, `ToolResult`) shaped by
    the version's model, for every call of `CALLS` that returns; a plain JSON result
    skips both, anything else takes them."""
    mcp = _server()
    await install_schema_lookup(mcp)
    direct = DirectToolCalls(None, mcp=mcp, sessions=lambda: None)
    caller = caller_of(mcp)
    tools = {tool.name: tool for tool in await mcp.list_tools()}
    plain: list[str] = []
    for name, arguments in CALLS:
        try:
            expected = direct._for_version(
                version, _shape_result(await tools[name]._run(dict(arguments)))
            )
        except Exception:
            continue  # an error: shaped by the one path both share
        try:
            result = await caller.call(name, dict(arguments))
        except ToolError as exc:  # the argument guard, a middleware the first call skips
            assert "nothing was done" in str(exc)
            continue
        shaped = direct._plain(version, result) if type(result) is PlainResult else None
        if shaped is not None:
            plain.append(name)
        got = shaped if shaped is not None else direct._for_version(version, _shape_result(result))
        assert jsoncodec.dumps(got) == jsoncodec.dumps(expected), (name, arguments)
    kinds = len(VALUES)
    assert plain == [
        "echo",
        "words",
        *["same"] * kinds,
        *["untyped"] * kinds,
        *["encoded"] * len([v for v in VALUES if isinstance(v, dict)]),
        "nothing",
        "big",
        "as_object",
        "number",  # 0.1 and 1e300; NaN is not plain, nor a model, nor `set[int]`
        "number",
        "serialized",  # plain once its serializer ran
    ]


def test_the_runners_results_are_what_model_construct_builds() -> None:
    from fastmcp.tools.base import ToolResult
    from mcp_types import TextContent

    from butlers.daemon.calls import _plain_result, _text_block

    block = _text_block("ü")
    assert block == TextContent.model_construct(type="text", text="ü")
    assert block.model_fields_set == {"type", "text"}
    meta = {"fastmcp": {"wrap_result": True}}
    built = _plain_result([block], {"result": 1}, meta)
    expected = PlainResult.model_construct(
        content=[block], structured_content={"result": 1}, meta=meta, is_error=False
    )
    assert built == expected
    assert built.model_dump() == expected.model_dump()
    assert built.to_mcp_result() == expected.to_mcp_result()
    validated = ToolResult(
        content=[TextContent(type="text", text="ü")], structured_content={"result": 1}, meta=meta
    )
    assert built.model_dump() == validated.model_dump()
