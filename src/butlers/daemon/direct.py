"""A direct path for `tools/call` on `/mcp`, beside the MCP SDK's transport.

The SDK's streamable-HTTP transport hands every request through memory streams and a
per-session message loop, and answers a 2025 session's call as an event stream: about
a millisecond per call before any tool runs. `DirectToolCalls` answers the plain case
itself, with one JSON body, and hands everything else to the SDK unchanged:

- what it answers: `POST /mcp` with one JSON-RPC `tools/call` request (name, arguments,
  `_meta`) from a client that accepts JSON, either in a live
  2025 session (`Mcp-Session-Id` known to the SDK and opened by the same credential)
  or as a stateless 2026-07-28 request whose envelope and headers the SDK's own
  validator accepts;
- what it runs: the server's tool as `FastMCP.call_tool` runs it (`calls.ToolCaller`),
  so the same middleware chain (the access rule,
  the argument guard, the approval gate, the tool span) and the same argument
  validation; the caller's identity and MCP session reach that chain through
  context variables, the caller's trace context from `_meta`; results and errors are
  shaped as FastMCP's own handler shapes them;
- what it keeps of the protocol: a 2025 call holds its session open (the SDK's idle
  timer is suspended while it runs) and can be cancelled by `notifications/cancelled`
  (answered `-32800`, as the SDK answers); a 2026 call is cancelled when its client
  closes the connection (the 2026 rule; watched from `WATCH_AFTER` into the call).
- what it gives up: messages from server to client during the call. A tool of the
  table (`calls.ToolCaller`) takes no FastMCP `Context`, so it cannot report progress,
  log to the client, sample or elicit anyway: a progress token or log level a client
  sends (FastMCP's client sends both on every call) asks for nothing it could get. A
  call with a progress token to any other tool goes to the SDK, which streams. No
  butler has an event store, so no resumable stream is lost. Batches, unknown headers
  (`Mcp-Param-*`), continuation rounds, tasks and every error case also go to the SDK,
  which answers them as it always did.

Everything in front of it still applies: `AuthGate` (Host, Origin, token) and
`BodyLimit` (size and deadline) run first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import DisabledError, FastMCPError, NotFoundError
from fastmcp.server.dependencies import _client_tool_call, _ClientToolCall
from fastmcp.telemetry import TRACE_PARENT_KEY, TRACE_STATE_KEY, extract_trace_context
from fastmcp.tools.base import ToolResult
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import (
    X_MCP_HEADER_KEY,
    InboundModernRoute,
    classify_inbound_request,
    validate_mcp_param_headers,
)
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    SERVER_INFO_META_KEY,
    CallToolResult,
    TextContent,
)
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context

from butlers import jsoncodec
from butlers.auth.identity import Identity, current_identity, current_mcp_session
from butlers.auth.middleware import SCOPE_KEY
from butlers.daemon.calls import PlainResult, caller_of

log = logging.getLogger(__name__)
REQUEST_CANCELLED = -32800  # what the SDK answers a cancelled 2025 request
INTERNAL_ERROR = -32603
WATCH_AFTER = 0.02  # seconds a 2026 call runs before its connection is watched
CALL_PARAMS = frozenset({"name", "arguments", "_meta"})
# Headers the plan reads; any `mcp-param-*` header sends the request to the SDK.
WANTED = frozenset(
    {
        b"content-type",
        b"accept",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
    }
)

Scope = dict[str, Any]
Message = dict[str, Any]
SessionsOf = Callable[[], StreamableHTTPSessionManager | None]


@dataclass(slots=True)
class _Plan:
    """A `tools/call` the direct path answers: what it asked for, and in which session."""

    request_id: int | str
    name: str
    arguments: dict[str, Any]
    meta: dict[str, Any] | None
    session_id: str | None
    version: str


class DirectToolCalls:
    """ASGI middleware: answers plain `tools/call` requests on `path` itself."""

    def __init__(self, app: Any, *, mcp: FastMCP, sessions: SessionsOf, path: str = "/mcp") -> None:
        self.app = app
        self.mcp = mcp
        self.sessions = sessions
        self.path = path
        self.caller = caller_of(mcp)
        # 2025 calls in flight, by (session id, JSON-RPC id): what `notifications/cancelled`
        # may cancel. The session id is bound to the credential that opened it.
        self._in_flight: dict[tuple[str, int | str], asyncio.Task[Any]] = {}
        self.answered = 0  # how many calls took this path (tests read it)
        self._annotations: dict[str, tuple[Any, bool]] = {}
        self._stamp: Any = None
        self._layouts: dict[str, tuple[tuple[str, ...], tuple[str, ...]] | None] = {}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for key, value in scope["headers"]:
            if key in WANTED:
                headers[key.decode()] = value.decode("latin-1")
            elif key.startswith(b"mcp-param-"):
                await self.app(scope, receive, send)
                return
        message = await receive()
        body: bytes = message.get("body", b"")
        if message.get("more_body"):  # BodyLimit delivers bodies whole; be safe otherwise
            await self.app(scope, _replay(message, receive), send)
            return
        decoded = _decode(body) if _accepts(headers) else None
        plan = self._plan(scope, headers, decoded) if decoded is not None else None
        if plan is None:
            if decoded is not None:
                self._cancel_if_asked(headers, decoded)
            await self.app(scope, _replay(message, receive), send)
            return
        identity = scope.get(SCOPE_KEY)
        assert isinstance(identity, Identity)  # AuthGate let it through only with one
        answer: dict[str, Any] | None
        if plan.session_id is not None:
            answer = await self._in_session(plan, identity)
        else:
            answer = await self._stateless(plan, identity, receive)
        if answer is None:
            return  # the client went away: a 2026 request is not answered then
        self.answered += 1
        await _send_json(send, answer, plan.session_id)

    def _plan(self, scope: Scope, headers: dict[str, str], body: Any) -> _Plan | None:
        """What this path will answer, or None for the SDK to handle the request."""
        if not (
            isinstance(body, dict)
            and body.get("jsonrpc") == "2.0"
            and body.get("method") == "tools/call"
            and "result" not in body
            and "error" not in body
        ):
            return None
        request_id = body.get("id")
        params = body.get("params")
        if (
            isinstance(request_id, bool)
            or not isinstance(request_id, int | str)
            or not isinstance(params, dict)
            or not CALL_PARAMS.issuperset(params)
        ):
            return None
        name = params.get("name")
        arguments = params.get("arguments")
        meta = params.get("_meta")
        if arguments is None:
            arguments = {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        if meta is not None and not isinstance(meta, dict):
            return None
        if name in self.caller.streaming:
            return None  # it takes a `Context` to tell the client something: the SDK streams it
        if meta and "progressToken" in meta and not self.caller.silent(name):
            return None  # the tool may report progress: the SDK streams it
        version = headers.get("mcp-protocol-version")
        session_id = headers.get("mcp-session-id")
        if version in MODERN_PROTOCOL_VERSIONS:
            if session_id is not None:
                return None
            verdict = classify_inbound_request(body, headers=headers)
            if not isinstance(verdict, InboundModernRoute):
                return None
            if self._annotated(name) and validate_mcp_param_headers(
                self._schema(name), arguments, headers
            ):
                return None
            return _Plan(request_id, name, arguments, meta, None, version)
        if session_id is None or (
            version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        ):
            return None
        if not self._session_is_live(scope, session_id):
            return None
        return _Plan(
            request_id, name, arguments, meta, session_id, version or DEFAULT_NEGOTIATED_VERSION
        )

    def _for_version(self, version: str, result: dict[str, Any]) -> dict[str, Any]:
        """The result as the SDK's runner shapes it for the protocol version: the
        version's fields only; at 2026-07-28 `resultType` and the server's `_meta` stamp."""
        return self._stamped(version, serialize_server_result("tools/call", version, result))

    def _plain(self, version: str, result: PlainResult) -> dict[str, Any] | None:
        """`_for_version(version, _shape_result(result))` for a result built from a plain
        JSON value (`calls.PlainResult`), without the version's model: the model would
        validate text blocks, a JSON object of plain values, FastMCP's `_meta` and
        `isError: false`, all valid by construction, and dump them unchanged (plain
        values dump as they are), in the model's order of fields, which `_layout`
        reads once per version from the model itself. None when a block is not a plain
        text block (a middleware replaced it): the full path then."""
        if version not in self._layouts:
            self._layouts[version] = _layout(version)
        layout = self._layouts[version]
        if layout is None:
            return None
        fields, block_fields = layout
        blocks = []
        for block in result.content:
            if type(block) is not TextContent or block.annotations or block.meta:
                return None
            parts = {"text": block.text, "type": "text"}
            blocks.append({key: parts[key] for key in block_fields})
        values = {
            "_meta": result.meta,
            "content": blocks,
            "structuredContent": result.structured_content,
            "isError": result.is_error,
            "resultType": "complete",
        }
        shaped = {key: values[key] for key in fields if values[key] is not None}
        return self._stamped(version, shaped)

    def _stamped(self, version: str, shaped: dict[str, Any]) -> dict[str, Any]:
        if version in MODERN_PROTOCOL_VERSIONS:
            if shaped.get("resultType") is None:
                shaped["resultType"] = "complete"
            meta = shaped.get("_meta")
            if self._stamp is None:  # the SDK copies it per answer; ours is only encoded
                self._stamp = self.mcp._mcp_server.server_info_stamp
            stamp = self._stamp
            if meta is None:
                shaped["_meta"] = {SERVER_INFO_META_KEY: stamp}
            elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
                shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp}
        return shaped

    def _schema(self, name: str) -> Any:
        lookup = self.mcp._mcp_server.get_tool_input_schema
        return lookup(name) if lookup is not None else None

    def _annotated(self, name: str) -> bool:
        """Whether the tool's schema routes any argument through an `Mcp-Param-*` header
        (then the SDK's check runs on every call); remembered per schema."""
        schema = self._schema(name)
        if schema is None:
            return True  # unknown here: let the check decide
        known = self._annotations.get(name)
        if known is None or known[0] is not schema:
            known = (schema, X_MCP_HEADER_KEY in jsoncodec.dumps(schema).decode())
            self._annotations[name] = known
        return known[1]

    def _session_is_live(self, scope: Scope, session_id: str) -> bool:
        """The SDK knows this session, it is open, and this credential opened it."""
        manager = self.sessions()
        if manager is None:
            return False
        transport = manager._server_instances.get(session_id)
        if transport is None or transport.is_terminated:
            return False
        if transport.idle_scope is not None and transport.idle_scope.cancel_called:
            return False
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        return bool(requestor == manager._session_owners.get(session_id))

    async def _in_session(self, plan: _Plan, identity: Identity) -> dict[str, Any]:
        """A 2025 session's call: the session stays open while it runs; it can be
        cancelled by `notifications/cancelled`.

        The SDK holds a session's idle timer (`deadline = inf`) for each request and arms
        it again after (~5 us a call, two timer moves). Here the timer is left alone
        while the call ends well before it: the call holds it only if it is still
        running `margin` before the deadline (or the deadline is that close already),
        and the timer is armed again after the call only when it was held or was last
        armed more than `margin` ago. A session then idles out between its timeout
        less `margin` and its timeout after its last request (`margin`: a tenth of the
        timeout, at most 1 s)."""
        assert plan.session_id is not None
        task = asyncio.current_task()
        assert task is not None
        loop = task.get_loop()
        manager = self.sessions()
        transport = manager._server_instances.get(plan.session_id) if manager else None
        idle = transport.idle_scope if transport is not None else None
        timeout = transport._idle_timeout if transport is not None else None
        holder: asyncio.TimerHandle | None = None
        if idle is not None and transport is not None and timeout:
            transport._requests_in_flight += 1
            margin = min(1.0, timeout / 10)
            left = idle.deadline - loop.time()
            if left <= margin:
                idle.deadline = math.inf
            elif left != math.inf:
                holder = loop.call_later(left - margin, _hold, idle)
        key = (plan.session_id, plan.request_id)
        self._in_flight[key] = task
        try:
            return await self._run(plan, identity)
        except asyncio.CancelledError:
            if task.cancelling() and self._in_flight.get(key) is None:
                task.uncancel()  # cancelled by the client's notification: answer it
                return _error(plan.request_id, REQUEST_CANCELLED, "Request cancelled")
            raise
        finally:
            self._in_flight.pop(key, None)
            if idle is not None and transport is not None and timeout:
                if holder is not None:
                    holder.cancel()
                transport._requests_in_flight -= 1
                if not transport._requests_in_flight:
                    now = loop.time()  # `anyio.current_time()` on asyncio
                    if idle.deadline == math.inf or idle.deadline < now + timeout - margin:
                        idle.deadline = now + timeout

    async def _stateless(
        self, plan: _Plan, identity: Identity, receive: Any
    ) -> dict[str, Any] | None:
        """A 2026 call: cancelled (and not answered) when the client closes the connection.

        The connection is watched only once the call has run `WATCH_AFTER` seconds (a
        task per call costs ~20 us; a timer costs a fraction of that): a client that
        closes sooner has its call cancelled then, or finished by then."""
        task = asyncio.current_task()
        assert task is not None
        running = True
        gone: asyncio.Future[None] | None = None

        def went_away(done: asyncio.Future[None]) -> None:
            if running and not done.cancelled():
                task.cancel()

        def watch() -> None:
            nonlocal gone
            gone = asyncio.ensure_future(_disconnected(receive))
            gone.add_done_callback(went_away)

        timer = task.get_loop().call_later(WATCH_AFTER, watch)
        try:
            return await self._run(plan, identity)
        except asyncio.CancelledError:
            if gone is not None and gone.done() and not gone.cancelled():
                task.uncancel()
                log.info("tools/call %s cancelled: the client went away", plan.name)
                return None
            raise
        finally:
            running = False
            timer.cancel()
            if gone is not None:
                gone.cancel()

    def _cancel_if_asked(self, headers: dict[str, str], body: Any) -> None:
        """`notifications/cancelled` for a call of this path, in the same session."""
        session_id = headers.get("mcp-session-id")
        if (
            session_id is None
            or not isinstance(body, dict)
            or body.get("method") != "notifications/cancelled"
        ):
            return
        params = body.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return
        task = self._in_flight.pop((session_id, request_id), None)
        if task is not None:
            log.info("tools/call %s cancelled by the client", request_id)
            task.cancel()

    async def _run(self, plan: _Plan, identity: Identity) -> dict[str, Any]:
        """`FastMCP.call_tool` as FastMCP's own `tools/call` handler runs it."""
        who = current_identity.set(identity)
        # A 2026 request is its own connection: a fresh id, as FastMCP's `Context.session_id`
        # gives it (the approval gate records it for direct callers).
        session = current_mcp_session.set(plan.session_id or os.urandom(16).hex())
        client_call = _client_tool_call.set(_ClientToolCall())  # as FastMCP's handler sets it
        # FastMCP's extraction (which reads its settings and the environment) only when
        # there is a trace context to extract: without one it gives the current context.
        meta = plan.meta
        traced = meta is not None and (TRACE_PARENT_KEY in meta or TRACE_STATE_KEY in meta)
        parent = extract_trace_context(meta) if traced else None
        attached = otel_context.attach(parent) if parent is not None else None
        try:
            try:
                result = await self.caller.call(plan.name, plan.arguments)
            except (DisabledError, NotFoundError):
                shaped = _tool_error(f"Unknown tool: {plan.name!r}")
            except FastMCPError as exc:
                shaped = _tool_error(str(exc))
            else:
                plain = self._plain(plan.version, result) if type(result) is PlainResult else None
                if plain is None:
                    plain = self._for_version(plan.version, _shape_result(result))
                return {"jsonrpc": "2.0", "id": plan.request_id, "result": plain}
            shaped = self._for_version(plan.version, shaped)
            return {"jsonrpc": "2.0", "id": plan.request_id, "result": shaped}
        except Exception:
            log.exception("tools/call %s failed outside the tool", plan.name)
            return _error(plan.request_id, INTERNAL_ERROR, "Internal error")
        finally:
            _client_tool_call.reset(client_call)
            if attached is not None:
                otel_context.detach(attached)
            current_mcp_session.reset(session)
            current_identity.reset(who)


def _hold(idle: Any) -> None:
    """A call still running near its session's idle deadline holds the timer."""
    if not idle.cancel_called:
        idle.deadline = math.inf


def _shape(result: Any) -> dict[str, Any]:
    """A `to_mcp_result()` value as the SDK puts it on the wire."""
    if isinstance(result, tuple):
        result = CallToolResult(content=result[0], structured_content=result[1])
    elif not isinstance(result, CallToolResult):
        result = CallToolResult(content=result)
    shaped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return shaped


def _shape_result(result: ToolResult) -> dict[str, Any]:
    """`_shape(result.to_mcp_result())` without building a `CallToolResult` from blocks
    that are already validated: the same fields (the version's model validates them
    again in `_for_version`)."""
    if result._raw_mcp_result is not None or type(result) is not ToolResult:
        return _shape(result.to_mcp_result())
    shaped: dict[str, Any] = {}
    if result.meta is not None:
        shaped["_meta"] = result.meta
    shaped["content"] = [
        block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content
    ]
    if result.structured_content is not None:
        shaped["structuredContent"] = result.structured_content
    shaped["isError"] = result.is_error
    shaped["resultType"] = "complete"  # `CallToolResult`'s default
    return shaped


def _layout(version: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The order in which the version's `CallToolResult` model puts the fields a
    `PlainResult` has, and its text block's fields (the fields it drops are left out);
    None when the model adds a field of its own (then every result takes the model)."""
    probe = {
        "_meta": {},
        "content": [{"type": "text", "text": ""}],
        "structuredContent": {},
        "isError": False,
        "resultType": "complete",
    }
    shaped = serialize_server_result("tools/call", version, probe)
    fields, block_fields = tuple(shaped), tuple(shaped["content"][0])
    if not (set(fields) <= set(probe) and set(block_fields) <= {"type", "text"}):
        return None
    return fields, block_fields


def _tool_error(text: str) -> dict[str, Any]:
    return _shape(CallToolResult(content=[TextContent(type="text", text=text)], is_error=True))


def _error(request_id: int | str, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _accepts(headers: dict[str, str]) -> bool:
    """JSON body in, and a client that takes both answers (as the SDK requires)."""
    if not headers.get("content-type", "").startswith("application/json"):
        return False
    return _accepts_both(headers.get("accept", ""))


@lru_cache(maxsize=64)  # a client sends the same `Accept` on every request
def _accepts_both(accept: str) -> bool:
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    wildcard = "*/*" in kinds
    return (wildcard or bool(kinds & {"application/json", "application/*"})) and (
        wildcard or bool(kinds & {"text/event-stream", "text/*"})
    )


def _decode(body: bytes) -> Any:
    try:
        return jsoncodec.loads(body)
    except (ValueError, RecursionError):  # not JSON, or refused here: the SDK answers it
        return None


async def _disconnected(receive: Any) -> None:
    while (await receive()).get("type") != "http.disconnect":
        pass


def _replay(first: Message, receive: Any) -> Any:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return first
        message: Message = await receive()
        return message

    return replay


async def _send_json(send: Any, answer: dict[str, Any], session_id: str | None) -> None:
    payload = jsoncodec.dumps(answer)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
