"""Tool spans: attributes, redaction and trace-context propagation across MCP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from butlers.telemetry import (
    REDACTED,
    JsonLinesSpanExporter,
    ToolSpanMiddleware,
    configure_tracing,
    redact,
    tracer,
)
from tests.support.spans import read_spans

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("another test installed a tracer provider first")
    configure_tracing("unit", exporter=EXPORTER)


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

    mcp.add_middleware(
        ToolSpanMiddleware(
            "health", {"login": "auth"}.get, lambda n: ["user"] if n == "login" else []
        )
    )
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


def test_redact_replaces_known_secret_values_anywhere() -> None:
    value = {"note": "my key is sk-secret-123", "items": ["sk-secret-123"], "token": "x"}
    assert redact(value, secrets=["sk-secret-123"]) == {
        "note": f"my key is {REDACTED}",
        "items": [REDACTED],
        "token": REDACTED,
    }


def test_json_lines_exporter_writes_readable_spans(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "s.jsonl")))
    t = provider.get_tracer("t")
    with t.start_as_current_span("outer"), t.start_as_current_span("inner"):
        pass
    inner, outer = read_spans(tmp_path / "s.jsonl")
    assert inner["parent_span_id"] == outer["span_id"]
    assert inner["trace_id"] == outer["trace_id"]
