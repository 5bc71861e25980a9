"""The spawner: one LLM session at a time per butler, each logged in `sessions`.

Triggers queue on a FIFO lock (asyncio.Lock wakes waiters in arrival order), so
external and scheduled triggers interleave without starvation and session windows
never overlap. Every session is exactly two writes: the `running` row before the
runtime starts and the completed (or error) row after, both inside the lock. The
lock is released whatever happens: error, timeout (`error="timeout"`), cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from butlers.llm.types import SessionRequest, SessionRuntime, SessionTrace
from butlers.pricing import cost_usd
from butlers.redaction import Redactor
from butlers.stores.sessions import SessionStore
from butlers.telemetry import tracer

log = logging.getLogger(__name__)


class NoRuntimeConfigured(Exception):
    """The butler has no LLM runtime; the message says how to configure one."""


@dataclass
class SpawnerResult:
    """The outcome of one session, as `trigger` returns it."""

    session_id: str
    success: bool
    output: str | None
    error: str | None
    duration_ms: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    trigger_source: str = "trigger"
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "success": self.success,
            "output": self.output,
            "error": self.error,
            "duration_ms": self.duration_ms,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "model": self.model,
            "trigger_source": self.trigger_source,
            "cost_usd": self.cost_usd,
        }


def current_trace_id() -> str:
    """The active OpenTelemetry trace id, else a fresh one in the same format."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return f"{context.trace_id:032x}"
    return secrets.token_hex(16)


class Spawner:
    def __init__(
        self,
        *,
        butler: str,
        store: SessionStore,
        runtime: SessionRuntime | None,
        not_configured: str,
        system: str = "",
        timeout_seconds: float = 300.0,
        max_turns: int = 20,
        env: dict[str, str] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.butler = butler
        self._store = store
        self._runtime = runtime
        self._not_configured = not_configured
        self._system = system
        self._timeout = timeout_seconds
        self._max_turns = max_turns
        self._env = dict(env or {})
        self._redactor = redactor or Redactor([])
        self._lock = asyncio.Lock()

    @property
    def configured(self) -> bool:
        return self._runtime is not None

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    async def trigger(
        self,
        prompt: str,
        *,
        trigger_source: str = "trigger",
        context: Any = None,
        timeout_seconds: float | None = None,
    ) -> SpawnerResult:
        if self._runtime is None:
            raise NoRuntimeConfigured(self._not_configured)
        runtime = self._runtime
        timeout = min(timeout_seconds or self._timeout, self._timeout)
        async with self._lock:
            with tracer().start_as_current_span(
                "butler.session",
                attributes={"butler.name": self.butler, "session.trigger_source": trigger_source},
            ) as span:
                result = await self._run_locked(runtime, prompt, trigger_source, context, timeout)
                span.set_attributes(
                    {
                        "session.id": result.session_id,
                        "session.success": result.success,
                        "session.duration_ms": result.duration_ms,
                        "session.tool_calls": len(result.tool_calls),
                        **({"session.error": result.error} if result.error else {}),
                    }
                )
                return result

    async def _run_locked(
        self,
        runtime: SessionRuntime,
        prompt: str,
        trigger_source: str,
        context: Any,
        timeout: float,
    ) -> SpawnerResult:
        session_id = uuid.uuid4()
        started = time.monotonic()
        log.info(
            "spawner trigger: session %s (%s) started on %s",
            session_id,
            trigger_source,
            runtime.model_name,
        )
        await self._store.create(
            session_id,
            butler_name=self.butler,
            trigger_source=trigger_source,
            prompt=self._redactor.text(prompt),
            model=runtime.model_name,
            trace_id=current_trace_id(),
            context=self._redactor.value(context),
        )
        session = SessionTrace()
        request = SessionRequest(
            butler=self.butler,
            session_id=str(session_id),
            system=self._system,
            prompt=prompt,
            max_turns=self._max_turns,
            context=context,
            env=self._env,
        )
        output: str | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(timeout):
                output = await runtime.run(request, session)
        except TimeoutError:
            error = "timeout"
        except asyncio.CancelledError:
            # The caller went away (e.g. a route timeout closed the request): the row
            # must not stay `running` forever.
            await asyncio.shield(
                self._cancelled(session_id, started, session, runtime, trigger_source)
            )
            raise
        except Exception as exc:
            error = f"{exc.__class__.__name__}: {exc}"
        if error is None and not (output or "").strip():
            error = "the runtime returned an empty answer"
        result = self._result(session_id, started, session, runtime, trigger_source, output, error)
        await asyncio.shield(self._complete(session_id, result))
        if error:
            log.warning("session %s (%s) failed: %s", session_id, trigger_source, result.error)
        else:
            log.info(
                "session %s (%s) completed in %d ms",
                session_id,
                trigger_source,
                result.duration_ms,
            )
        return result

    async def _cancelled(
        self,
        session_id: uuid.UUID,
        started: float,
        session: SessionTrace,
        runtime: SessionRuntime,
        trigger_source: str,
    ) -> None:
        error = "cancelled: the caller stopped waiting"
        result = self._result(session_id, started, session, runtime, trigger_source, None, error)
        await self._complete(session_id, result)
        log.warning("session %s (%s) cancelled", session_id, trigger_source)

    def _result(
        self,
        session_id: uuid.UUID,
        started: float,
        session: SessionTrace,
        runtime: SessionRuntime,
        trigger_source: str,
        output: str | None,
        error: str | None,
    ) -> SpawnerResult:
        """The redacted, priced outcome of a session (what `trigger` returns and logs)."""
        result = SpawnerResult(
            session_id=str(session_id),
            success=error is None,
            output=self._redactor.text(output) if output is not None else None,
            error=self._redactor.text(error) if error else None,
            duration_ms=max(0, round((time.monotonic() - started) * 1000)),
            tool_calls=self._redactor.value(session.tool_calls),
            input_tokens=session.input_tokens,
            output_tokens=session.output_tokens,
            model=runtime.model_name,
            trigger_source=trigger_source,
        )
        result.cost_usd = cost_usd(result.model, result.input_tokens, result.output_tokens)
        return result

    async def _complete(self, session_id: uuid.UUID, result: SpawnerResult) -> None:
        await self._store.complete(
            session_id,
            status="completed" if result.success else "error",
            duration_ms=result.duration_ms,
            tool_calls=result.tool_calls,
            output=result.output,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            error=result.error,
            cost_usd=result.cost_usd,
        )

    async def aclose(self) -> None:
        if self._runtime is not None:
            await self._runtime.aclose()
