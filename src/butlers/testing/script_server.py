"""An HTTP script server for the `scripted` runtime, run by a test (or benchmark) process.

Butlers are separate processes; their scripted adapter POSTs every model request
to `<url>/next` and gets the next step. Steps are consumed per butler first
(`route(butler, ...)`), then from the shared sequence (`add(...)`), as in document
001. Every request is recorded; a request with no step left is recorded as a
failure, and `check()` reports failures and leftover steps.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def step(
    text: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    error: str | None = None,
    delay: float | None = None,
    usage: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """One model reply: text, tool calls `[{"name", "arguments"}]` or an error."""
    entry: dict[str, Any] = {}
    if text is not None:
        entry["text"] = text
    if tool_calls is not None:
        entry["tool_calls"] = tool_calls
    if error is not None:
        entry["error"] = error
    if delay is not None:
        entry["delay"] = delay
    if usage is not None:
        entry["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    if not entry.keys() & {"text", "tool_calls", "error"}:
        raise ValueError("a step needs text, tool_calls or error")
    return entry


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


class Script:
    """Sequential steps plus steps routed per butler; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sequential: deque[dict[str, Any]] = deque()
        self._routes: dict[str, deque[dict[str, Any]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.failures: list[str] = []

    def add(self, *steps: dict[str, Any]) -> Script:
        with self._lock:
            self._sequential.extend(steps)
        return self

    def route(self, butler: str, *steps: dict[str, Any]) -> Script:
        with self._lock:
            self._routes.setdefault(butler, deque()).extend(steps)
        return self

    def next_step(self, request: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            self.requests.append(request)
            queue = self._routes.get(request.get("butler", ""))
            if queue:
                return queue.popleft()
            if self._sequential:
                return self._sequential.popleft()
            self.failures.append(
                f"script exhausted: no step left for butler {request.get('butler')!r} "
                f"(request {len(self.requests)})"
            )
            return None

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
        return problems


class ScriptServer:
    """Serves one `Script` at a time from a background thread.

    On 127.0.0.1 by default; `host="0.0.0.0"` when the runtimes calling it are not on
    this machine's loopback (pods of a kind cluster). `url` is always the loopback one.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.script = Script()
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
                entry = server.script.next_step(request)
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
        self.script = Script()
        return self.script

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
