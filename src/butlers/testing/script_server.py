"""An HTTP script server for the `scripted` runtime, run by a test (or benchmark) process.

Butlers are separate processes; their scripted adapter POSTs every model request
to `<url>/next` and gets the next step. Steps are consumed per butler first
(`route(butler, ...)`), then from the shared sequence (`add(...)`), as in document
001. Every request is recorded; a request with no step left is recorded as a
failure, and `check()` reports failures and leftover steps.

Concurrent sessions: `route(butler, ..., when=TEXT)` steps go only to requests whose
messages contain TEXT, so messages in flight at once each get their own steps.
Holding a request: `step(..., hold=NAME)` keeps that model request waiting in the
server until the test calls `release(NAME)` (bounded by `HOLD_TIMEOUT`), so a test
can act while a session is provably mid-request (`held(NAME)` counts the waiters).
`usage="measured"` reports tokens from the request's and the reply's size (about
four characters a token), so prompt growth shows up in token counts and cost.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

# The longest a held request waits for `release` (below the adapter's request timeout).
HOLD_TIMEOUT = 30.0
CHARS_PER_TOKEN = 4


def step(
    text: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    error: str | None = None,
    delay: float | None = None,
    usage: tuple[int, int] | Literal["measured"] | None = None,
    hold: str | None = None,
) -> dict[str, Any]:
    """One model reply: text, tool calls `[{"name", "arguments"}]` or an error.

    `hold`: the request waits in the server until `Script.release(hold)`.
    `usage`: (input, output) tokens, or "measured" from the request and reply size.
    """
    entry: dict[str, Any] = {}
    if text is not None:
        entry["text"] = text
    if tool_calls is not None:
        entry["tool_calls"] = tool_calls
    if error is not None:
        entry["error"] = error
    if delay is not None:
        entry["delay"] = delay
    if usage == "measured":
        entry["usage"] = "measured"
    elif usage is not None:
        entry["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    if hold is not None:
        entry["hold"] = hold
    if not entry.keys() & {"text", "tool_calls", "error"}:
        raise ValueError("a step needs text, tool_calls or error")
    return entry


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def offered_tools(request: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(the tools a recorded request was sent with their definitions, the tools it could
    load by name through `load_tools`): together, every tool the session may call."""
    sent, waiting = set(), set()
    for tool in request.get("tools") or []:
        if tool["name"] == "load_tools" and "names" in tool["input_schema"]["properties"]:
            waiting |= set(tool["input_schema"]["properties"]["names"]["items"]["enum"])
        else:
            sent.add(tool["name"])
    return sent, waiting


def measured_tokens(text: str) -> int:
    """Tokens of a text as the scripted model counts them (about four characters each)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def measured_usage(request: dict[str, Any], entry: dict[str, Any]) -> dict[str, int]:
    """Usage of one model call from what was sent (system, messages, tools) and answered."""
    sent = json.dumps(
        [request.get("system"), request.get("messages"), request.get("tools")], sort_keys=True
    )
    answered = json.dumps([entry.get("text"), entry.get("tool_calls")], sort_keys=True)
    return {"input_tokens": measured_tokens(sent), "output_tokens": measured_tokens(answered)}


def _request_text(request: dict[str, Any]) -> str:
    return json.dumps(request.get("messages") or [], ensure_ascii=False)


class Script:
    """Sequential steps plus steps routed per butler; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sequential: deque[dict[str, Any]] = deque()
        self._routes: dict[str, deque[dict[str, Any]]] = {}
        self._matched: list[tuple[str, str, deque[dict[str, Any]]]] = []
        self._gates: dict[str, threading.Event] = {}
        self._held: dict[str, int] = {}
        self._closed = False
        self.requests: list[dict[str, Any]] = []
        self.failures: list[str] = []

    def add(self, *steps: dict[str, Any]) -> Script:
        with self._lock:
            self._sequential.extend(steps)
        return self

    def route(self, butler: str, *steps: dict[str, Any], when: str | None = None) -> Script:
        """Steps for `butler`'s requests; with `when`, only for requests whose messages
        contain that text (checked before the butler's other steps)."""
        with self._lock:
            if when is None:
                self._routes.setdefault(butler, deque()).extend(steps)
            else:
                for b, text, queue in self._matched:
                    if (b, text) == (butler, when):
                        queue.extend(steps)
                        break
                else:
                    self._matched.append((butler, when, deque(steps)))
        return self

    def next_step(self, request: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            self.requests.append(request)
            butler = request.get("butler", "")
            text = _request_text(request)
            for b, when, matched in self._matched:
                if b == butler and matched and when in text:
                    return matched.popleft()
            queue = self._routes.get(butler)
            if queue:
                return queue.popleft()
            if self._sequential:
                return self._sequential.popleft()
            self.failures.append(
                f"script exhausted: no step left for butler {butler!r} "
                f"(request {len(self.requests)})"
            )
            return None

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The step for a request as the adapter gets it: held until released when it
        says `hold`, with measured usage filled in."""
        entry = self.next_step(request)
        if entry is None:
            return None
        entry = dict(entry)
        gate = entry.pop("hold", None)
        if gate is not None and not self._wait(gate):
            return {"error": f"scripted model: hold {gate!r} ended without a release"}
        if entry.get("usage") == "measured":
            entry["usage"] = measured_usage(request, entry)
        return entry

    def _gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def _wait(self, name: str) -> bool:
        gate = self._gate(name)
        with self._lock:
            self._held[name] = self._held.get(name, 0) + 1
        try:
            released = gate.wait(HOLD_TIMEOUT)
        finally:
            with self._lock:
                self._held[name] -= 1
        if not released:
            with self._lock:
                self.failures.append(f"hold {name!r} was never released ({HOLD_TIMEOUT:g} s)")
        return released and not self._closed

    def held(self, name: str) -> int:
        """How many model requests wait at the `hold` named `name` right now."""
        with self._lock:
            return self._held.get(name, 0)

    def release(self, name: str) -> None:
        """Let every request held at `name` (and any that arrives later) go on."""
        self._gate(name).set()

    def close(self) -> None:
        """Release every hold: the test is over (held requests get no step)."""
        self._closed = True
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.set()

    def requests_for(self, butler: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r.get("butler") == butler]

    def check(self) -> list[str]:
        """Problems to fail a test with: exhausted requests and steps never used."""
        problems = list(self.failures)
        with self._lock:
            if self._sequential:
                problems.append(f"{len(self._sequential)} sequential step(s) never requested")
            problems += [
                f"{len(q)} step(s) routed to {b!r} never requested"
                for b, q in self._routes.items()
                if q
            ]
            problems += [
                f"{len(q)} step(s) routed to {b!r} when {text!r} never requested"
                for b, text, q in self._matched
                if q
            ]
        return problems


class ScriptServer:
    """Serves one `Script` at a time from a background thread.

    On 127.0.0.1 by default; `host="0.0.0.0"` when the runtimes calling it are not on
    this machine's loopback (pods of a kind cluster). `url` is always the loopback one.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.script = Script()
        self.requests_served = 0  # over every script of the server's life
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: adapters reuse one connection
            disable_nagle_algorithm = True  # headers and body are separate writes

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    request = {"invalid": True}
                server.requests_served += 1
                entry = server.script.answer(request)
                status = 200 if entry is not None else 409
                body = json.dumps(entry or {"error": "LLM script exhausted"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="llm-script-server", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ScriptServer:
        self._thread.start()
        return self

    def reset(self) -> Script:
        self.script.close()
        self.script = Script()
        return self.script

    def stop(self) -> None:
        self.script.close()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
