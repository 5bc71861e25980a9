"""Fake model endpoints speaking real wire formats, and a tiny butler server to drive."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastmcp import FastMCP


class FakeEndpoint:
    """Answers POSTs with queued JSON bodies; records paths, headers and bodies."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                status, reply = endpoint.replies.pop(0)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"


@pytest.fixture
def fake_endpoint() -> Iterator[FakeEndpoint]:
    endpoint = FakeEndpoint()
    endpoint._thread.start()
    yield endpoint
    endpoint._httpd.shutdown()
    endpoint._httpd.server_close()
    assert endpoint.replies == [], "fake endpoint replies left over"


@pytest.fixture
def tiny_butler() -> FastMCP:
    mcp = FastMCP("health")
    store: dict[str, Any] = {}

    @mcp.tool
    async def remember(key: str, value: str) -> dict:
        """Remember a value."""
        store[key] = value
        return {"stored": key}

    @mcp.tool
    async def trigger(prompt: str) -> str:
        """Hidden from sessions."""
        return prompt

    return mcp
