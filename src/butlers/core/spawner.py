"""The spawner: one LLM session at a time per butler, each logged in `sessions`.

Triggers queue on a FIFO baton (`core.baton`), so external and scheduled triggers
interleave without starvation and only one session works at a time. A session that
holds no tool at all (the switchboard's classifier) cannot change anything the baton
guards, so it does not take the baton: up to `max_toolless` of them run side by side
(otherwise every incoming message would wait for each other's classification). A session whose
tool call waits for a person's approval steps aside (`stepping_aside`) and queues
again to continue, so it never blocks the butler's other sessions. Every session is
exactly two writes: the `running` row before the runtime starts and the completed
(or error) row after, both while it holds the baton; the second carries the session's
model calls (`llm_calls`). The baton is released whatever happens: error, timeout
(`error="timeout"`), cancellation. The user may cancel a running session (`cancel`):
its runtime is stopped and the row ends `cancelled`.

A runtime that does not record its own tool calls (claude-code: they reach the butler
over HTTP) has them recorded by the butler as they run (`record_tool_call`), into the
same trace, so every session's row shows what it did.

Session hooks (`add_hook`, registered by modules) run around each session that
holds tools: `before_session` returns text added to the opening message (recalled
memory), `after_session` sees the outcome (an episode). A hook that fails or overruns
its deadline is logged and skipped: it never fails the session.

The queue is bounded (`max_queued`): beyond it a trigger is refused at once with
`SpawnerBusy`. A trigger with an idempotency key runs at most once per key: a repeat
(a caller retrying after a dropped connection, the switchboard re-dispatching after a
crash) waits for the first session or returns its recorded result. A keyed session is
owned by the spawner, not by the caller's request, so a dropped connection does not
cancel it and the repeat gets its real outcome.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import asyncpg

from butlers.core.baton import Baton
from butlers.core.llm_records import stored_llm_calls
from butlers.llm.types import SessionFailure, SessionRequest, SessionRuntime, SessionTrace
from butlers.pricing import PRICES, Price, cost_usd
from butlers.redaction import Redactor
from butlers.stores.sessions import SessionStore
from butlers.telemetry import current_trace_id, tracer

log = logging.getLogger(__name__)


HOOK_SECONDS = 5.0  # what a session hook may take before it is skipped
DEFAULT_MAX_QUEUED = 32
DEFAULT_MAX_TOOLLESS = 4  # tool-less sessions (classifications) running at once
# A session whose process died (a crash, kill -9) is marked with this at start-up.
INTERRUPTED = "interrupted: the butler process stopped while the session ran"
COMPLETE_RETRY_SECONDS = 60.0  # how long the final write waits out a database outage
CANCEL_WAIT_SECONDS = 30.0  # how long `cancel` waits for the stopped session's row
MAX_SERVER_RECORDED_CALLS = 1000  # tool calls the butler records for one session


def _total(counts: Iterable[int | None]) -> int | None:
    """The sum of the counts given, None when none was."""
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


class NoRuntimeConfigured(Exception):
    """The butler has no LLM runtime; the message says how to configure one."""


class SpawnerBusy(Exception):
    """The butler's session queue is full; the message says so and what to do."""


class IdempotencyConflict(Exception):
    """An idempotency key was used before for a different request."""


class NotCancellable(Exception):
    """The session is not running in this butler process; the message says why."""


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
    # Of the input, what the provider read from / wrote to its prompt cache.
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    model: str | None = None
    trigger_source: str = "trigger"
    cost_usd: float | None = None
    # True when this is the recorded outcome of an earlier call with the same key.
    duplicate: bool = False
    llm_call_count: int = 0
    # The rows of its model calls (stored with the session, not returned by `trigger`).
    llm_calls: list[dict[str, Any]] = field(default_factory=list, repr=False)

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
            "duplicate": self.duplicate,
            "llm_call_count": self.llm_call_count,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any], *, duplicate: bool) -> SpawnerResult:
        """The outcome a session row records (a keyed trigger asked again)."""
        status = row["status"]
        error = None if status == "completed" else row["error"]
        if status == "running":
            error = f"session {row['session_id']} is still running in another process"
        cost = row.get("cost_usd")
        return cls(
            session_id=str(row["session_id"]),
            success=status == "completed",
            output=row["output"],
            error=error,
            duration_ms=row["duration_ms"] or 0,
            tool_calls=list(row["tool_calls"] or []),
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cached_tokens=row.get("cached_tokens"),
            cache_write_tokens=row.get("cache_write_tokens"),
            model=row["model"],
            trigger_source=row["trigger_source"],
            cost_usd=None if cost is None else float(cost),
            duplicate=duplicate,
            llm_call_count=row.get("llm_call_count") or 0,
        )


def request_hash(prompt: str, context: Any) -> str:
    """What a repeated keyed trigger must match: its prompt and context."""
    text = json.dumps([prompt, context], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class SessionHook(Protocol):
    async def before_session(self, prompt: str, trigger_source: str) -> str: ...

    async def after_session(
        self, prompt: str, trigger_source: str, result: SpawnerResult
    ) -> None: ...


@dataclass
class _Running:
    """A session whose runtime runs in this process: its task, who cancelled it."""

    task: asyncio.Task[str]
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled_by: str | None = None


@dataclass
class _Keyed:
    """A keyed session in flight: its request hash and the task that runs it."""

    digest: str
    task: asyncio.Task[SpawnerResult]


def session_trace_id() -> str:
    """The active OpenTelemetry trace id, else a fresh one in the same format."""
    return current_trace_id() or secrets.token_hex(16)


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
        prices: dict[str, Price] | None = None,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_toolless: int = DEFAULT_MAX_TOOLLESS,
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
        self._prices = PRICES if prices is None else prices
        self._baton = Baton()
        self._toolless = asyncio.Semaphore(max_toolless)
        self._max_queued = max_queued
        self._queued = 0  # sessions running or waiting for the lock
        self._keyed: dict[str, _Keyed] = {}
        self._running: set[uuid.UUID] = set()  # session rows this process is writing
        self._active: dict[uuid.UUID, _Running] = {}  # runtimes running now
        self._server_traces: dict[str, SessionTrace] = {}  # see record_tool_call
        self._hooks: list[SessionHook] = []
        self._closing = False

    def add_hook(self, hook: SessionHook) -> None:
        """Run `hook` around every session that holds tools (not the classifier)."""
        self._hooks.append(hook)

    @property
    def store(self) -> SessionStore:
        return self._store

    @property
    def configured(self) -> bool:
        return self._runtime is not None

    @property
    def busy(self) -> bool:
        return self._baton.busy

    @property
    def queued(self) -> int:
        return self._queued

    def activity(self) -> dict[str, Any]:
        """Whether a session runs now and how many sessions wait in line for it."""
        return {"running": self.busy, "queued": self._baton.waiting}

    async def trigger(
        self,
        prompt: str,
        *,
        trigger_source: str = "trigger",
        context: Any = None,
        timeout_seconds: float | None = None,
        idempotency_key: str | None = None,
        tools: bool = True,
    ) -> SpawnerResult:
        """Run one session; `tools=False` gives it no tool at all (the classifier)."""
        if self._runtime is None:
            raise NoRuntimeConfigured(self._not_configured)
        timeout = min(timeout_seconds or self._timeout, self._timeout)
        if idempotency_key is not None:
            return await self._trigger_keyed(
                prompt, trigger_source, context, timeout, idempotency_key, tools
            )
        self._admit()
        try:
            return await self._session(prompt, trigger_source, context, timeout, None, None, tools)
        finally:
            self._queued -= 1

    def _admit(self) -> None:
        if self._queued >= self._max_queued:
            raise SpawnerBusy(
                f"butler {self.butler!r} is busy: {self._queued} sessions are running or "
                f"queued (the limit is {self._max_queued}); try again later"
            )
        self._queued += 1

    async def _trigger_keyed(
        self,
        prompt: str,
        trigger_source: str,
        context: Any,
        timeout: float,
        key: str,
        tools: bool,
    ) -> SpawnerResult:
        digest = request_hash(prompt, context)
        keyed = self._keyed.get(key)
        if keyed is None:
            row = await self._store.by_idempotency_key(key)
            if row is not None:
                self._check_same_request(key, row["request_hash"], digest)
                return SpawnerResult.from_row(row, duplicate=True)
            keyed = self._keyed.get(key)  # started by another call while we looked
        if keyed is not None:
            self._check_same_request(key, keyed.digest, digest)
            return replace(await asyncio.shield(keyed.task), duplicate=True)
        self._admit()
        task = asyncio.create_task(
            self._session(prompt, trigger_source, context, timeout, key, digest, tools),
            name=f"session {self.butler} {key}",
        )
        self._keyed[key] = _Keyed(digest, task)

        def done(finished: asyncio.Task[SpawnerResult]) -> None:
            self._queued -= 1
            self._keyed.pop(key, None)
            if not finished.cancelled() and finished.exception() is not None:
                log.error("keyed session %s failed: %s", key, finished.exception())

        task.add_done_callback(done)
        # The session belongs to the spawner: a caller that goes away (a dropped
        # connection) stops waiting, the session goes on and a repeat gets its outcome.
        return await asyncio.shield(task)

    @staticmethod
    def _check_same_request(key: str, recorded: str | None, digest: str) -> None:
        if recorded is not None and recorded != digest:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was already used for a different prompt or "
                "context; use a new key for a new request"
            )

    async def _session(
        self,
        prompt: str,
        trigger_source: str,
        context: Any,
        timeout: float,
        key: str | None,
        digest: str | None,
        tools: bool = True,
    ) -> SpawnerResult:
        runtime = self._runtime
        assert runtime is not None
        session_id = uuid.uuid4()
        async with self._turn(session_id, tools):
            with tracer().start_as_current_span(
                "butler.session",
                attributes={"butler.name": self.butler, "session.trigger_source": trigger_source},
            ) as span:
                result = await self._run_locked(
                    runtime,
                    session_id,
                    prompt,
                    trigger_source,
                    context,
                    timeout,
                    key,
                    digest,
                    tools,
                )
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

    @asynccontextmanager
    async def _turn(self, session_id: uuid.UUID, tools: bool) -> AsyncIterator[None]:
        """The session's turn: the baton, or for a session without tools (nothing the
        baton guards) one of the slots beside the butler's other sessions."""
        if not tools:
            async with self._toolless:
                yield
            return
        await self._baton.take(str(session_id))
        try:
            yield
        finally:
            self._baton.end(str(session_id))

    @asynccontextmanager
    async def stepping_aside(self, session_id: str) -> AsyncIterator[None]:
        """While a tool call of session `session_id` waits for a person, the butler's
        other sessions run; afterwards it queues to continue (`SessionEnded` if it
        ended meanwhile). A no-op for anything but the session at work.
        """
        if self._baton.holder != session_id:
            yield
            return
        self._baton.give(session_id)
        log.info("session %s steps aside while its call waits for approval", session_id)
        yield  # an exception here (the caller went away) ends it: no queuing again
        await self._baton.take(session_id)

    async def _run_locked(
        self,
        runtime: SessionRuntime,
        session_id: uuid.UUID,
        prompt: str,
        trigger_source: str,
        context: Any,
        timeout: float,
        key: str | None = None,
        digest: str | None = None,
        tools: bool = True,
    ) -> SpawnerResult:
        started = time.monotonic()
        self._running.add(session_id)
        try:
            created = await self._store.create(
                session_id,
                butler_name=self.butler,
                trigger_source=trigger_source,
                prompt=self._redactor.text(prompt),
                model=runtime.model_name,
                trace_id=session_trace_id(),
                context=self._redactor.value(context),
                idempotency_key=key,
                request_hash=digest,
            )
            if not created:  # the key was recorded by another process meanwhile
                assert key is not None
                row = await self._store.by_idempotency_key(key)
                assert row is not None
                self._check_same_request(key, row["request_hash"], digest or "")
                return SpawnerResult.from_row(row, duplicate=True)
            log.info(
                "spawner trigger: session %s (%s) started on %s",
                session_id,
                trigger_source,
                runtime.model_name,
            )
            return await self._run_created(
                session_id, started, runtime, prompt, trigger_source, context, timeout, tools
            )
        finally:
            self._running.discard(session_id)

    async def _run_created(
        self,
        session_id: uuid.UUID,
        started: float,
        runtime: SessionRuntime,
        prompt: str,
        trigger_source: str,
        context: Any,
        timeout: float,
        tools: bool = True,
    ) -> SpawnerResult:
        session = SessionTrace()

        async def recall_then_run() -> str:
            # The before-hooks run inside the session's task: cancelling the session
            # while they work (a first recall loads the embedding model) stops them too.
            recalled = await self._before(prompt, trigger_source) if tools else ""
            request = SessionRequest(
                butler=self.butler,
                session_id=str(session_id),
                system=self._system,
                prompt=prompt,
                max_turns=self._max_turns,
                context=context,
                env=self._env,
                tools=tools,
                recalled=recalled,
            )
            return await runtime.run(request, session)

        output: str | None = None
        error: str | None = None
        status: str | None = None
        running = _Running(asyncio.create_task(recall_then_run(), name=f"session {session_id}"))
        self._active[session_id] = running
        if not getattr(runtime, "records_tool_calls", True):
            self._server_traces[str(session_id)] = session
        try:
            try:
                async with asyncio.timeout(timeout):
                    output = await running.task
            except TimeoutError:
                error = "timeout"
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if running.cancelled_by is None or (me is not None and me.cancelling()):
                    # The caller went away (e.g. a route timeout closed the request): the
                    # row must not stay `running` forever.
                    running.task.cancel()
                    await asyncio.shield(
                        self._cancelled(session_id, started, session, runtime, trigger_source)
                    )
                    raise
                error, status = f"cancelled by {running.cancelled_by}", "cancelled"
            except SessionFailure as exc:  # the model failed: expected, no traceback needed
                error = f"{exc.__class__.__name__}: {exc}"
            except Exception as exc:  # a bug (ours or an adapter's): keep its traceback
                error = f"{exc.__class__.__name__}: {exc}"
                log.exception("session %s (%s): the runtime raised", session_id, trigger_source)
            if error is None and not (output or "").strip():
                error = "the runtime returned an empty answer"
            result = self._result(
                session_id, started, session, runtime, trigger_source, output, error
            )
            await asyncio.shield(self._complete(session_id, result, status))
            if tools:
                await self._after(self._redactor.text(prompt), trigger_source, result)
        finally:
            self._active.pop(session_id, None)
            self._server_traces.pop(str(session_id), None)
            running.finished.set()
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

    async def _before(self, prompt: str, trigger_source: str) -> str:
        parts = []
        for hook in self._hooks:
            try:
                async with asyncio.timeout(HOOK_SECONDS):
                    text = await hook.before_session(prompt, trigger_source)
            except TimeoutError:
                log.warning(
                    "session hook %s overran %g s; skipped", type(hook).__name__, HOOK_SECONDS
                )
                continue
            except Exception:
                log.exception("session hook %s failed before the session", type(hook).__name__)
                continue
            if text:
                parts.append(text)
        return "\n\n".join(parts)

    async def _after(self, prompt: str, trigger_source: str, result: SpawnerResult) -> None:
        for hook in self._hooks:
            try:
                async with asyncio.timeout(HOOK_SECONDS):
                    await hook.after_session(prompt, trigger_source, result)
            except TimeoutError:
                log.warning(
                    "session hook %s overran %g s; skipped", type(hook).__name__, HOOK_SECONDS
                )
            except Exception:
                log.exception("session hook %s failed after the session", type(hook).__name__)

    async def cancel(self, session_id: uuid.UUID, by: str) -> None:
        """Stop a running session's runtime; its row ends `cancelled` (recorded before
        this returns, waited for at most `CANCEL_WAIT_SECONDS`)."""
        running = self._active.get(session_id)
        if running is None:
            raise NotCancellable(
                f"session {session_id} is not running on butler {self.butler!r} "
                "(it ended, or it never ran here)"
            )
        if running.cancelled_by is None:
            running.cancelled_by = by
            running.task.cancel()
            log.warning("session %s: cancelled by %s", session_id, by)
        try:
            async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                await running.finished.wait()
        except TimeoutError:
            raise NotCancellable(
                f"session {session_id} was asked to stop but has not ended within "
                f"{CANCEL_WAIT_SECONDS:g} s"
            ) from None

    def record_tool_call(self, session_id: str, call: dict[str, Any]) -> None:
        """A tool call a running session made over HTTP (a runtime that does not record
        its own calls); ignored for any other session."""
        trace = self._server_traces.get(session_id)
        if trace is not None and len(trace.tool_calls) < MAX_SERVER_RECORDED_CALLS:
            trace.tool_calls.append(call)

    async def _cancelled(
        self,
        session_id: uuid.UUID,
        started: float,
        session: SessionTrace,
        runtime: SessionRuntime,
        trigger_source: str,
    ) -> None:
        if self._closing:
            error, status = "interrupted: the butler shut down during the session", "interrupted"
        else:
            error, status = "cancelled: the caller stopped waiting", "error"
        result = self._result(session_id, started, session, runtime, trigger_source, None, error)
        await self._complete(session_id, result, status)
        log.warning("session %s (%s) %s", session_id, trigger_source, error)

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
            tool_calls=self._redactor.tool_calls(session.tool_calls),
            input_tokens=session.input_tokens,
            output_tokens=session.output_tokens,
            cached_tokens=_total(c.cached_tokens for c in session.llm_calls),
            cache_write_tokens=_total(c.cache_write_tokens for c in session.llm_calls),
            model=runtime.model_name,
            trigger_source=trigger_source,
            llm_call_count=len(session.llm_calls),
            llm_calls=stored_llm_calls(session.llm_calls, self._redactor, runtime.model_name),
        )
        result.cost_usd = cost_usd(
            result.model,
            result.input_tokens,
            result.output_tokens,
            self._prices,
            cached_tokens=result.cached_tokens,
            cache_write_tokens=result.cache_write_tokens,
        )
        return result

    async def _complete(
        self, session_id: uuid.UUID, result: SpawnerResult, status: str | None = None
    ) -> None:
        """The second write; retried while the database is unreachable (bounded), so a
        short outage does not leave the row `running`."""
        deadline = time.monotonic() + COMPLETE_RETRY_SECONDS
        delay = 0.2
        while True:
            try:
                await self._store.complete(
                    session_id,
                    status=status or ("completed" if result.success else "error"),
                    duration_ms=result.duration_ms,
                    tool_calls=result.tool_calls,
                    output=result.output,
                    input_tokens=result.input_tokens,
                    output_tokens=result.output_tokens,
                    error=result.error,
                    cost_usd=result.cost_usd,
                    llm_calls=result.llm_calls,
                    cached_tokens=result.cached_tokens,
                    cache_write_tokens=result.cache_write_tokens,
                )
                return
            except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError) as exc:
                if time.monotonic() + delay > deadline:
                    log.error("session %s: its outcome could not be written: %s", session_id, exc)
                    raise
                log.warning("session %s: database unreachable (%s); retrying", session_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def recover(self) -> int:
        """Mark sessions left `running` by a dead process as `interrupted` (start-up, and
        periodically for rows whose final write never landed); returns how many."""
        count = await self._store.interrupt_running(INTERRUPTED, keep=list(self._running))
        if count:
            log.warning("marked %d orphaned session(s) as interrupted", count)
        return count

    async def aclose(self) -> None:
        self._closing = True
        tasks = [keyed.task for keyed in self._keyed.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._runtime is not None:
            await self._runtime.aclose()
