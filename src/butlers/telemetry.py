"""Tracing: OpenTelemetry spans for every tool call and session, redacted.

FastMCP already opens a SERVER span per request and carries the caller's trace
context in the request's `_meta`, so a call from the switchboard continues the
switchboard's trace inside the target butler. `ToolSpanMiddleware` adds one
span per tool call with the attributes the dashboards and tests rely on.

Exporters: OTLP over HTTP when an endpoint is configured; a JSON-lines file
(used by the multi-process e2e suite to collect spans of every butler);
in-memory for in-process tests.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastmcp.server.middleware import Middleware, MiddlewareContext
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Status, StatusCode

log = logging.getLogger("butlers.tool_span")
REDACTED = "[REDACTED]"
SENSITIVE_KEY = re.compile(r"(pass(word)?|secret|token|api[_-]?key|credential|authorization)", re.I)
TRACER = "butlers"
MCP_SDK_TRACER = "mcp-python-sdk"


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


# -- redaction ---------------------------------------------------------------------


def redact(value: Any, sensitive: Iterable[str] = (), secrets: Iterable[str] = ()) -> Any:
    """A copy of `value` with sensitive keys and known secret strings replaced."""
    names = set(sensitive)
    known = [s for s in secrets if s and len(s) >= 4]

    def walk(item: Any, key: str | None = None) -> Any:
        if key is not None and (key in names or SENSITIVE_KEY.search(key)):
            return REDACTED
        if isinstance(item, Mapping):
            return {str(k): walk(v, str(k)) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        if isinstance(item, str):
            for secret in known:
                if secret in item:
                    item = item.replace(secret, REDACTED)
        return item

    return walk(value)


# -- exporters ----------------------------------------------------------------------


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": format(context.trace_id, "032x") if context else None,
        "span_id": format(context.span_id, "016x") if context else None,
        "parent_span_id": format(parent.span_id, "016x") if parent else None,
        "service": span.resource.attributes.get("service.name"),
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
    }


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line to a file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_to_dict(s), default=str) + "\n" for s in spans)
        with self._lock, self._path.open("a") as fh:
            fh.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


class _PassThroughTracer(trace.NoOpTracer):
    """Opens no span: whatever is current stays current (and is what gets injected)."""

    @contextmanager
    def start_as_current_span(self, *_args: Any, **_kwargs: Any) -> Iterator[trace.Span]:  # type: ignore[override]
        yield trace.get_current_span()


class ButlersTracerProvider(TracerProvider):
    """The MCP SDK's per-request client spans are left out: the caller's own span
    (e.g. the switchboard's route span) is then the parent of the callee's spans."""

    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> trace.Tracer:  # type: ignore[override]
        if instrumenting_module_name == MCP_SDK_TRACER:
            return _PassThroughTracer()
        return super().get_tracer(instrumenting_module_name, *args, **kwargs)


def configure_tracing(
    service: str,
    *,
    otlp_endpoint: str | None = None,
    span_file: Path | None = None,
    exporter: SpanExporter | None = None,
) -> TracerProvider | None:
    """Install a tracer provider for this process; None when nothing is configured.

    FastMCP is switched to propagation-only: it carries trace context across MCP
    calls but opens no spans of its own, so a target butler's tool span is a direct
    child of the caller's span (the switchboard's route span), and each call costs
    two spans fewer. The MCP SDK's client spans are left out for the same reason.
    """
    import fastmcp

    fastmcp.settings.telemetry_mode = "propagation_only"
    exporters: list[tuple[SpanExporter, bool]] = []
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = otlp_endpoint.rstrip("/")
        if not endpoint.endswith("/v1/traces"):
            endpoint += "/v1/traces"
        exporters.append((OTLPSpanExporter(endpoint=endpoint, timeout=10), True))
    if span_file:
        exporters.append((JsonLinesSpanExporter(span_file), False))
    if exporter is not None:
        exporters.append((exporter, False))
    if not exporters:
        return None
    provider = ButlersTracerProvider(resource=Resource.create({"service.name": service}))
    for item, batched in exporters:
        provider.add_span_processor(
            BatchSpanProcessor(item) if batched else SimpleSpanProcessor(item)
        )
    trace.set_tracer_provider(provider)
    return provider


# -- tool spans -----------------------------------------------------------------------


class ToolSpanMiddleware(Middleware):
    """One span per tool call: name, butler, module, redacted args, status, duration."""

    def __init__(
        self,
        butler: str,
        modules: Callable[[str], str | None],
        sensitive_args: Callable[[str], Iterable[str]] = lambda _name: (),
        secrets: Callable[[], Iterable[str]] = lambda: (),
    ) -> None:
        self._butler = butler
        self._modules = modules
        self._sensitive = sensitive_args
        self._secrets = secrets

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        message = context.message
        name = getattr(message, "name", "?")
        arguments = getattr(message, "arguments", None) or {}
        start = time.perf_counter()
        with tracer().start_as_current_span(f"tool {name}") as span:
            span.set_attribute("tool.name", name)
            span.set_attribute("tool.butler", self._butler)
            span.set_attribute("tool.module", self._modules(name) or "unknown")
            args = redact(arguments, self._sensitive(name), self._secrets())
            span.set_attribute("tool.args", json.dumps(args, default=str, ensure_ascii=False))
            try:
                result = await call_next(context)
            except Exception as exc:
                span.set_attribute("tool.result.status", "error")
                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
                log.info("call_tool %s error: %s", name, exc.__class__.__name__)
                raise
            finally:
                span.set_attribute(
                    "tool.duration_ms", round((time.perf_counter() - start) * 1000, 3)
                )
            is_error = bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
            status = "error" if is_error else "ok"
            span.set_attribute("tool.result.status", status)
            log.info(
                "call_tool %s %s in %.1f ms", name, status, (time.perf_counter() - start) * 1000
            )
            return result
