"""The OpenTelemetry SDK side of tracing: the JSON-lines exporter, the butlers' tracer
provider and its installation. Imported only by a process that traces something
(`telemetry.configure_tracing` with an exporter) and by tests."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from butlers.telemetry import EXPORT_DELAY_MS, MCP_SDK_TRACER, trace_hex


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": trace_hex(context.trace_id) if context else None,
        "span_id": format(context.span_id, "016x") if context else None,
        "parent_span_id": format(parent.span_id, "016x") if parent else None,
        "service": span.resource.attributes.get("service.name"),
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
    }


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line to a file only its owner can read."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_to_dict(s), default=str) + "\n" for s in spans)
        with self._lock:
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.fchmod(fd, 0o600)  # also when the file existed with a wider mode
            with os.fdopen(fd, "a") as fh:
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

    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> trace.Tracer:
        if instrumenting_module_name == MCP_SDK_TRACER:
            return _PassThroughTracer()
        return super().get_tracer(instrumenting_module_name, *args, **kwargs)


def install_provider(
    service: str, exporters: Sequence[tuple[SpanExporter, bool]]
) -> TracerProvider:
    """This process's tracer provider, exporting to each of `exporters` (batched or not)."""
    provider = ButlersTracerProvider(resource=Resource.create({"service.name": service}))
    for item, batched in exporters:
        provider.add_span_processor(
            BatchSpanProcessor(item, schedule_delay_millis=EXPORT_DELAY_MS)
            if batched
            else SimpleSpanProcessor(item)
        )
    trace.set_tracer_provider(provider)
    return provider
