"""The MCP client of every part of butlers that calls a butler: the switchboard's
dispatch and registration, the dashboard, `butlers up` and `butlers send`.

Standard MCP over streamable HTTP (the 2025-11-25 session protocol: `initialize`,
then requests carrying `Mcp-Session-Id`), spoken directly as JSON-RPC over
`http1.Http1Pool`: keep-alive connections, the request written and its answer (JSON,
or an event stream) read in the caller's task. No MCP SDK or FastMCP import (the
dashboard runs without them), no task per client or per call. A tool call carries
the caller's trace context in `_meta` (`traceparent`, as FastMCP's client sends it).

One `McpClient` serves any number of endpoints, keeping one MCP session per URL,
opened on first use. Retries never run a call twice: a call the server never saw
(nothing was sent, or the server answered 404 for a session it forgot after a
restart) is repeated on a fresh session; a call whose connection failed after it was
sent may have run, so it is repeated only when the caller says it is idempotent (a
read, or a write carrying an idempotency key the server deduplicates), and is
otherwise `OutcomeUnknown`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import propagate

from butlers import jsoncodec
from butlers.http1 import Http1Pool, HttpFailure, HttpResponse, HttpTransport

log = logging.getLogger(__name__)
PROTOCOL_VERSION = "2025-11-25"
DEFAULT_TIMEOUT = 60.0
OPEN_TIMEOUT = 10.0
ACCEPT = "application/json, text/event-stream"
OPENED_KEPT = 256


class EndpointUnavailable(ConnectionError):
    """The MCP endpoint could not be reached, or answered outside the protocol."""


class OutcomeUnknown(EndpointUnavailable):
    """The connection failed after the call was sent: it may or may not have run."""


class McpError(Exception):
    """A JSON-RPC error answer (the request reached the server and was refused)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message


class ToolFailed(Exception):
    """The tool ran (or was refused by the server's rules) and answered an error."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.text or "the tool failed")
        self.result = result


@dataclass(frozen=True)
class ToolResult:
    """A `tools/call` answer: `data` is the structured content (unwrapped as FastMCP
    wraps non-object results), else the text parsed as JSON, else the text."""

    data: Any
    text: str
    is_error: bool
    raw: Mapping[str, Any] = field(repr=False)


def decode_result(result: Mapping[str, Any]) -> ToolResult:
    blocks = result.get("content") or []
    text = "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
    if result.get("isError"):
        return ToolResult(None, text, True, result)
    structured = result.get("structuredContent")
    if structured is not None:
        wrapped = ((result.get("_meta") or {}).get("fastmcp") or {}).get("wrap_result")
        if wrapped and isinstance(structured, dict) and "result" in structured:
            structured = structured["result"]
        return ToolResult(structured, text, False, result)
    try:
        return ToolResult(json.loads(text), text, False, result)
    except ValueError:
        return ToolResult(text, text, False, result)


@dataclass
class _Session:
    session_id: str | None
    version: str
    headers: dict[str, str]


class _SessionGone(Exception):
    """The server no longer knows the session (it restarted): it never saw the request."""


class McpClient:
    def __init__(
        self,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        client_name: str = "butlers",
        http: HttpTransport | None = None,
    ) -> None:
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._client_name = client_name
        self._http: HttpTransport = http or Http1Pool()
        self._sessions: dict[str, _Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._ids = itertools.count(1)
        self.opened_count = 0  # sessions opened over this client's life
        # The ids of the sessions it opened lately (a server records them with the calls).
        self.opened_sessions: collections.deque[str] = collections.deque(maxlen=OPENED_KEPT)

    @property
    def cached_count(self) -> int:
        return len(self._sessions)

    async def call_tool(
        self,
        url: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        idempotent: bool = False,
        timeout: float | None = None,
        raise_on_error: bool = True,
    ) -> ToolResult:
        """Call a tool; an error answer raises `ToolFailed` (or is returned, with
        `raise_on_error=False`). Tool errors are never retried."""
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        carrier: dict[str, str] = {}
        propagate.inject(carrier)  # the caller's trace continues in the butler
        meta = {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}
        if meta:
            params["_meta"] = meta
        answer = await self.request(
            url, "tools/call", params, idempotent=idempotent, timeout=timeout
        )
        result = decode_result(answer)
        if result.is_error and raise_on_error:
            raise ToolFailed(result)
        return result

    async def list_tools(self, url: str, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """`tools/list`: dicts with name, description, inputSchema, _meta…"""
        result = await self.request(url, "tools/list", {}, idempotent=True, timeout=timeout)
        return list(result.get("tools") or [])

    async def request(
        self,
        url: str,
        method: str,
        params: Mapping[str, Any],
        *,
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One JSON-RPC request in the URL's session; its result."""
        for attempt in (1, 2):
            session = await self._session(url)
            try:
                return await self._post(url, method, params, session, timeout)
            except _SessionGone:
                self._sessions.pop(url, None)
                if attempt == 2:
                    raise EndpointUnavailable(f"{url}: the server refused the session") from None
                log.info("MCP session with %s is gone (the server restarted); reopening", url)
            except HttpFailure as exc:
                self._sessions.pop(url, None)
                if attempt == 1 and (not exc.sent or idempotent):
                    log.info("MCP connection to %s failed (%s); trying again", url, exc)
                    continue
                if not exc.sent:
                    raise EndpointUnavailable(str(exc)) from None
                if idempotent:
                    raise EndpointUnavailable(str(exc)) from None
                raise OutcomeUnknown(
                    f"{exc} (the connection failed after {method} was sent; not repeated, "
                    "since it may have run)"
                ) from None
        raise AssertionError("unreachable")

    async def drop(self, url: str) -> None:
        """Forget the URL's session (the next request opens a new one)."""
        session = self._sessions.pop(url, None)
        if session is not None and session.session_id:
            try:
                await self._http.request("DELETE", url, session.headers, b"", 2.0)
            except HttpFailure:
                pass

    async def aclose(self) -> None:
        for url in list(self._sessions):
            await self.drop(url)
        await self._http.aclose()

    close = aclose

    async def _session(self, url: str) -> _Session:
        known = self._sessions.get(url)
        if known is not None:
            return known
        async with self._locks.setdefault(url, asyncio.Lock()):
            known = self._sessions.get(url)
            if known is None:
                known = await self._open(url)
                self._sessions[url] = known
            return known

    async def _open(self, url: str) -> _Session:
        """`initialize` + `notifications/initialized`; nothing else was sent before."""
        base = {**self._headers, "Accept": ACCEPT, "Content-Type": "application/json"}
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": self._client_name, "version": "1"},
        }
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
        try:
            response = await self._http.request(
                "POST", url, base, jsoncodec.dumps(body), OPEN_TIMEOUT
            )
            result = _answer(url, "initialize", response, request_id)
            version = str(result.get("protocolVersion") or PROTOCOL_VERSION)
            session_id = response.headers.get("mcp-session-id")
            headers = {**base, "MCP-Protocol-Version": version}
            if session_id:
                headers["Mcp-Session-Id"] = session_id
            note = jsoncodec.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            done = await self._http.request("POST", url, headers, note, OPEN_TIMEOUT)
        except HttpFailure as exc:
            raise EndpointUnavailable(f"{url}: no MCP session: {exc}") from None
        if done.status >= 400:
            raise EndpointUnavailable(
                f"{url} refused notifications/initialized: HTTP {done.status}"
            )
        self.opened_count += 1
        if session_id:
            self.opened_sessions.append(session_id)
        return _Session(session_id, version, headers)

    async def _post(
        self,
        url: str,
        method: str,
        params: Mapping[str, Any],
        session: _Session,
        timeout: float | None,
    ) -> dict[str, Any]:
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self._http.request(
            "POST", url, session.headers, jsoncodec.dumps(body), timeout or self._timeout
        )
        if response.status == 404 and session.session_id:
            raise _SessionGone
        return _answer(url, method, response, request_id)


def _answer(url: str, method: str, response: HttpResponse, request_id: int) -> dict[str, Any]:
    """The result of `request_id` in a JSON or event-stream answer; errors raised."""
    if response.status >= 400:
        text = response.body.decode(errors="replace")[:300]
        raise EndpointUnavailable(f"{url} answered HTTP {response.status} to {method}: {text}")
    kind = response.headers.get("content-type", "")
    message: dict[str, Any] | None
    if kind.startswith("application/json"):
        message = _match(jsoncodec.loads(response.body), request_id)
    elif kind.startswith("text/event-stream"):
        message = None
        for data in _events(response.body):
            message = _match(jsoncodec.loads(data), request_id)
            if message is not None:
                break
    else:
        raise EndpointUnavailable(f"{url} answered {method} with content type {kind!r}")
    if message is None:
        raise EndpointUnavailable(f"{url} answered {method} without its result")
    if "error" in message:
        error = message["error"] or {}
        raise McpError(int(error.get("code", 0)), str(error.get("message", "")))
    return dict(message.get("result") or {})


def _events(body: bytes) -> list[bytes]:
    """The `data` of each event of an event stream."""
    events: list[bytes] = []
    data: list[bytes] = []
    for line in body.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[5:].strip())
        elif not line and data:
            events.append(b"\n".join(data))
            data = []
    if data:
        events.append(b"\n".join(data))
    return events


def _match(message: Any, request_id: int) -> dict[str, Any] | None:
    """The answer to `request_id` in a message (or batch); notifications are skipped."""
    for item in message if isinstance(message, list) else [message]:
        if isinstance(item, dict) and item.get("id") == request_id:
            return item
    return None
