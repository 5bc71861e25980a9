"""Tracing: OpenTelemetry spans for every tool call and session, redacted.

FastMCP already opens a SERVER span per request and carries the caller's trace
context in the request's `_meta`, so a call from the switchboard continues the
switchboard's trace inside the target butler. `ToolSpanMiddleware` adds one
span per tool call with the attributes the dashboards and tests rely on.

Exporters (`telemetry.export`, with the OpenTelemetry SDK it needs): OTLP over HTTP
when an endpoint is configured; a JSON-lines file (used by the multi-process e2e suite
to collect spans of every butler); in-memory for in-process tests. A butler that
traces nothing never imports the SDK (about 1.4 MB of every butler process, with
`psutil`): spans then go to the API's no-op tracer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastmcp.server.middleware import Middleware, MiddlewareContext
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from butlers.redaction import Redactor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("butlers.tool_span")
TRACER = "butlers"
MCP_SDK_TRACER = "mcp-python-sdk"


def trace_hex(trace_id: int) -> str:
    """A trace id as rows, spans and logs write it (32 hex digits)."""
    return f"{trace_id:032x}"


def current_trace_id() -> str | None:
    """The active trace's id (`trace_hex`), or None outside a recording trace."""
    context = trace.get_current_span().get_span_context()
    return trace_hex(context.trace_id) if context.is_valid else None


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


@contextlib.contextmanager
def trace_of(trace_id: str | None = None) -> Iterator[str | None]:
    """Work that belongs to one trace, whether or not spans are exported.

    With `trace_id` (a stored trace, resumed later): that trace becomes current. Without
    it, outside any trace: a fresh trace id becomes current. Without a tracer provider
    the current span is a non-recording one carrying the id, so the rows this work
    writes (messages, routes, sessions) and the calls it makes (`traceparent` in MCP
    `_meta`) still carry one trace id per message, in every butler it reaches. With a
    provider and no stored id, the provider's own root span does that instead.
    Yields the trace id current inside (None: the provider will pick it)."""
    current = trace.get_current_span().get_span_context()
    if trace_id is None and current.is_valid:
        yield trace_hex(current.trace_id)
        return
    if trace_id is None and tracing_configured():
        yield None
        return
    try:
        number = int(trace_id, 16) if trace_id else 0
    except ValueError:
        number = 0
    if not number:
        number = int.from_bytes(secrets.token_bytes(16), "big") or 1
    sampled = trace.TraceFlags.SAMPLED if tracing_configured() else trace.TraceFlags.DEFAULT
    parent = trace.SpanContext(
        trace_id=number,
        span_id=int.from_bytes(secrets.token_bytes(8), "big") or 1,
        is_remote=True,
        trace_flags=trace.TraceFlags(sampled),
    )
    with trace.use_span(trace.NonRecordingSpan(parent), end_on_exit=False):
        yield trace_hex(number)


# The environment may name a provider for the API to load on first use.
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
_configured = False  # a provider, once set, is never unset (the API sets it once)


def tracing_configured() -> bool:
    """Whether this process has a tracer provider (`configure_tracing`, or another one
    set through OpenTelemetry): without one every span is a non-recording no-op.

    Asked on every tool call: the API's `get_tracer_provider` looks the environment up
    each time no provider is set (~1 us, several in a busy process). Until one is set,
    the API's own global is read instead (a missing attribute falls back to the API)."""
    global _configured
    if _configured:
        return True
    if getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None and not _PROVIDER_FROM_ENVIRONMENT:
        return False
    provider = trace.get_tracer_provider()
    _configured = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    return _configured


_UNKNOWN = object()


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
        from butlers.telemetry.export import JsonLinesSpanExporter

        # Batched: the file is written from the processor's thread, never the event loop.
        exporters.append((JsonLinesSpanExporter(span_file), True))
    if exporter is not None:
        exporters.append((exporter, False))
    if not exporters:
        return None
    from butlers.telemetry.export import install_provider

    return install_provider(service, exporters)


EXPORT_DELAY_MS = 100  # how long finished spans wait to be written, at most
SPAN_TEXT_LIMIT = 40  # characters of a string argument a span keeps (an id fits)
SPAN_ITEMS_LIMIT = 10  # items of a list or object argument a span keeps


def span_arguments(value: Any, depth: int = 0) -> Any:
    """`value` cut short for a span: strings to SPAN_TEXT_LIMIT characters (marked with
    their length), lists and objects to SPAN_ITEMS_LIMIT items, nesting to 3 levels."""
    if isinstance(value, str):
        if len(value) <= SPAN_TEXT_LIMIT:
            return value
        return f"{value[:SPAN_TEXT_LIMIT]}…({len(value)} chars)"
    if isinstance(value, Mapping):
        if depth >= 3:
            return f"…({len(value)} keys)"
        items = list(value.items())
        cut = {str(k): span_arguments(v, depth + 1) for k, v in items[:SPAN_ITEMS_LIMIT]}
        if len(items) > SPAN_ITEMS_LIMIT:
            cut["…"] = f"{len(items) - SPAN_ITEMS_LIMIT} more keys"
        return cut
    if isinstance(value, list | tuple):
        if depth >= 3:
            return f"…({len(value)} items)"
        cut_list = [span_arguments(v, depth + 1) for v in value[:SPAN_ITEMS_LIMIT]]
        if len(value) > SPAN_ITEMS_LIMIT:
            cut_list.append(f"…{len(value) - SPAN_ITEMS_LIMIT} more items")
        return cut_list
    return value


# -- tool spans -----------------------------------------------------------------------


class ToolSpanMiddleware(Middleware):
    """One span per tool call: name, butler, module, args (redacted by the butler's one
    policy, `butlers.redaction`), status, duration."""

    def __init__(
        self, butler: str, modules: Callable[[str], str | None], redactor: Redactor
    ) -> None:
        self._butler = butler
        self._modules = modules
        self._redactor = redactor

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        message = context.message
        name = getattr(message, "name", "?")
        start = time.perf_counter()
        if not tracing_configured():
            # No tracer provider: a span would be a non-recording copy of the current
            # one (the same trace context inside the call), at ~5-20 us. Only the log line.
            try:
                result = await call_next(context)
            except Exception as exc:
                log.info("call_tool %s error: %s: %s", name, exc.__class__.__name__, str(exc)[:300])
                raise
            _log_done(name, "error" if _is_error(result) else "ok", start)
            return result
        arguments = getattr(message, "arguments", None) or {}
        with tracer().start_as_current_span(f"tool {name}") as span:
            # Attributes cost tens of microseconds (the arguments are redacted and
            # encoded): only for a span that is recorded (tracing configured).
            if span.is_recording():
                span.set_attribute("tool.name", name)
                span.set_attribute("tool.butler", self._butler)
                span.set_attribute("tool.module", self._modules(name) or "unknown")
                # Redacted by the butler's one policy, then cut short: spans are for
                # tracing, not a second copy of messages and stored values.
                args = span_arguments(self._redactor.arguments(name, arguments))
                span.set_attribute("tool.args", json.dumps(args, default=str, ensure_ascii=False))
            try:
                result = await call_next(context)
            except Exception as exc:
                span.set_attribute("tool.result.status", "error")
                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
                # One line per refused or failed call, with the reason (secrets are masked
                # in every log line by the redaction policy).
                log.info("call_tool %s error: %s: %s", name, exc.__class__.__name__, str(exc)[:300])
                raise
            finally:
                span.set_attribute(
                    "tool.duration_ms", round((time.perf_counter() - start) * 1000, 3)
                )
            status = "error" if _is_error(result) else "ok"
            span.set_attribute("tool.result.status", status)
            _log_done(name, status, start)
            return result


def _log_done(name: str, status: str, start: float) -> None:
    """The call's line, logged on the loop's next turn, after the call's answer has gone
    out (~0.4 us here instead of ~4 us for the record). Failures are logged at once."""
    if log.isEnabledFor(logging.INFO):
        elapsed = (time.perf_counter() - start) * 1000
        asyncio.get_running_loop().call_soon(
            log.info, "call_tool %s %s in %.1f ms", name, status, elapsed
        )


def _is_error(result: Any) -> bool:
    # `is_error` first: asking a pydantic result for a missing `isError` costs an exception.
    flag = getattr(result, "is_error", None)
    if flag is None:
        flag = getattr(result, "isError", False)
    return bool(flag)
