"""Tool spans: attributes, redaction and trace-context propagation across MCP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from butlers.redaction import MASK as REDACTED
from butlers.redaction import Redactor
from butlers.telemetry import ToolSpanMiddleware, configure_tracing, tracer
from butlers.telemetry.export import JsonLinesSpanExporter
from tests.support.spans import read_spans

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    """Spans of this module reach EXPORTER whatever ran first: OpenTelemetry takes one
    global provider per process, so if another test installed one already, the exporter
    is added to it (never a skip)."""
    installed = trace.get_tracer_provider()
    if isinstance(installed, trace.ProxyTracerProvider):
        configure_tracing("unit", exporter=EXPORTER)
    elif isinstance(installed, TracerProvider):
        installed.add_span_processor(SimpleSpanProcessor(EXPORTER))
    else:
        pytest.fail(f"a tracer provider that cannot export was installed: {installed!r}")


@pytest.fixture(autouse=True)
def _clear() -> None:
    EXPORTER.clear()


def _server() -> FastMCP:
    mcp = FastMCP("health")

    @mcp.tool
    def login(user: str, password: str, api_key: str = "") -> str:
        return f"hello {user}"

    @mcp.tool
    def fail() -> str:
        raise ValueError("nope")

    redactor = Redactor(sensitive_args={"login": ["user"]})
    mcp.add_middleware(ToolSpanMiddleware("health", {"login": "auth"}.get, redactor))
    return mcp


def _tool_spans() -> list:
    return [s for s in EXPORTER.get_finished_spans() if s.name.startswith("tool ")]


async def test_tool_span_has_the_expected_attributes() -> None:
    async with Client(_server()) as client:
        await client.call_tool("login", {"user": "ann", "password": "hunter2", "api_key": "sk-1"})
    [span] = _tool_spans()
    attrs = span.attributes
    assert attrs["tool.name"] == "login"
    assert attrs["tool.butler"] == "health"
    assert attrs["tool.module"] == "auth"
    assert attrs["tool.result.status"] == "ok"
    assert attrs["tool.duration_ms"] >= 0
    args = json.loads(attrs["tool.args"])
    assert args == {"user": REDACTED, "password": REDACTED, "api_key": REDACTED}


async def test_failed_tool_is_marked_error() -> None:
    async with Client(_server()) as client:
        await client.call_tool("fail", {}, raise_on_error=False)
    [span] = _tool_spans()
    assert span.attributes["tool.result.status"] == "error"


async def test_trace_context_crosses_into_the_server() -> None:
    async with Client(_server()) as client:
        with tracer().start_as_current_span("route") as parent:
            await client.call_tool("login", {"user": "a", "password": "b"})
    [span] = _tool_spans()
    assert span.context.trace_id == parent.get_span_context().trace_id


def test_json_lines_exporter_writes_readable_spans(tmp_path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "s.jsonl")))
    t = provider.get_tracer("t")
    with t.start_as_current_span("outer"), t.start_as_current_span("inner"):
        pass
    inner, outer = read_spans(tmp_path / "s.jsonl")
    assert inner["parent_span_id"] == outer["span_id"]
    assert inner["trace_id"] == outer["trace_id"]
    assert (tmp_path / "s.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_span_file_left_readable_by_others_is_closed_to_them(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("")
    path.chmod(0o644)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
    with provider.get_tracer("t").start_as_current_span("one"):
        pass
    assert path.stat().st_mode & 0o777 == 0o600


async def test_spans_keep_no_long_text_or_big_values() -> None:
    mcp = FastMCP("health")

    @mcp.tool
    def note(text: str, items: list[int]) -> str:
        return "ok"

    mcp.add_middleware(ToolSpanMiddleware("health", {}.get, Redactor()))
    message = "Dear diary, today my blood pressure was 150/95 and I felt dizzy all day."
    async with Client(mcp) as client:
        await client.call_tool("note", {"text": message, "items": list(range(50))})
    [span] = _tool_spans()
    args = json.loads(span.attributes["tool.args"])
    assert message not in span.attributes["tool.args"]
    assert args["text"] == f"{message[:40]}…({len(message)} chars)"
    assert args["items"] == [*range(10), "…40 more items"]
