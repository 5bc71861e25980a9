"""A small HTTP/1.1 client with keep-alive, for the MCP client's requests.

A general-purpose client (httpx) costs about a millisecond per request in Python
work; an MCP call needs one POST and one answer. `Http1Pool` keeps idle connections
per host, writes each request in one piece, and reads the answer (Content-Length,
chunked, or to the end of the connection) in the calling task: no background task,
no per-request stream objects.

Every request has a deadline; a connection whose request failed or was cancelled is
closed, never reused (its answer may still arrive). `HttpFailure.sent` says whether
the request may have reached the server: callers decide whether a retry is safe.

Plain `http://` requests honour `HTTP_PROXY`/`NO_PROXY` as other HTTP clients do (the
request goes to the proxy in absolute form); `https://` ones always connect directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit
from urllib.request import (  # type: ignore[attr-defined]
    getproxies_environment,
    proxy_bypass_environment,  # not in typeshed
)

CONNECT_TIMEOUT = 5.0
MAX_IDLE = 8  # idle connections kept per host
IDLE_FOR = 4.0  # seconds an idle connection is trusted (uvicorn closes them after 5)
MAX_BODY = 64 * 1024 * 1024
MAX_HEAD = 64 * 1024
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})  # never through a proxy


class HttpFailure(ConnectionError):
    """No answer: the connection failed, timed out, or the answer was not HTTP."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]  # lower-case names; repeated headers joined by ", "
    body: bytes


class HttpTransport(Protocol):
    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class _Target:
    key: tuple[str, str, int]
    host_header: str
    target: str


class _Connection:
    __slots__ = ("reader", "reused", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = time.monotonic()
        self.reused = False  # taken from the idle list: it carried a request before

    def reusable(self) -> bool:
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and time.monotonic() - self.used < IDLE_FOR
        )

    def close(self) -> None:
        self.writer.close()


class Http1Pool:
    def __init__(self, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self._connect_timeout = connect_timeout
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: dict[str, _Target] = {}
        self._closed = False

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        target = self._target(url)
        head = [f"{method} {target.target} HTTP/1.1", f"Host: {target.host_header}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        head.append(f"Content-Length: {len(body)}")
        payload = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        connection: _Connection | None = None
        sent = False
        try:
            async with asyncio.timeout(timeout):
                connection = await self._connection(target)
                connection.writer.write(payload)
                sent = True
                response, keep = await _read_response(connection.reader, method)
        except TimeoutError:
            _discard(connection)
            raise HttpFailure(f"{url}: no answer within {timeout:g} s", sent=sent) from None
        except (OSError, EOFError, ValueError, asyncio.LimitOverrunError) as exc:
            _discard(connection)
            if connection is not None and connection.reused:
                # A kept-alive connection the server dropped (it restarted, or timed it
                # out): the others kept for it are as old, so the next request connects anew.
                self._drop_idle(target)
            reason = f"{exc.__class__.__name__}: {exc}".rstrip(": ")
            raise HttpFailure(f"{url}: {reason}", sent=sent) from None
        except BaseException:  # cancelled: the answer may still come; never reuse it
            _discard(connection)
            raise
        if keep and not self._closed:
            self._release(target, connection)
        else:
            connection.close()
        return response

    def _target(self, url: str) -> _Target:
        known = self._targets.get(url)
        if known is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise HttpFailure(f"{url}: not an http(s) URL", sent=False)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            known = _Target((parts.scheme, parts.hostname, port), parts.netloc, path)
            proxy = _http_proxy(parts.scheme, parts.netloc)
            if proxy is not None:  # the proxy's connection, the absolute URL as target
                absolute = f"http://{parts.netloc}{path}"
                known = _Target(("http", proxy[0], proxy[1]), parts.netloc, absolute)
            self._targets[url] = known
        return known

    async def _connection(self, target: _Target) -> _Connection:
        idle = self._idle.get(target.key)
        while idle:
            connection = idle.pop()
            if connection.reusable():
                connection.reused = True
                return connection
            connection.close()
        scheme, host, port = target.key
        context = ssl.create_default_context() if scheme == "https" else None
        async with asyncio.timeout(self._connect_timeout):
            reader, writer = await asyncio.open_connection(host, port, ssl=context, limit=MAX_HEAD)
        return _Connection(reader, writer)

    def _drop_idle(self, target: _Target) -> None:
        for connection in self._idle.pop(target.key, []):
            connection.close()

    def _release(self, target: _Target, connection: _Connection) -> None:
        idle = self._idle.setdefault(target.key, [])
        if len(idle) >= MAX_IDLE:
            connection.close()
            return
        connection.used = time.monotonic()
        idle.append(connection)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()


def _http_proxy(scheme: str, netloc: str) -> tuple[str, int] | None:
    """The (host, port) of the HTTP proxy for a plain http URL, from the environment."""
    if scheme != "http" or urlsplit(f"//{netloc}").hostname in LOOPBACK:
        return None
    proxies = getproxies_environment()
    proxy = proxies.get("http")
    if not proxy or proxy_bypass_environment(netloc, proxies):
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        return None  # only plain HTTP proxies; anything else: connect directly
    return parts.hostname, parts.port or 80


def _discard(connection: _Connection | None) -> None:
    if connection is not None:
        with contextlib.suppress(Exception):
            connection.close()


async def _read_response(reader: asyncio.StreamReader, method: str) -> tuple[HttpResponse, bool]:
    """The answer, and whether the connection may carry another request."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise EOFError("the connection closed before an answer") from exc
    lines = raw[:-4].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
    status = int(rest[:3])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return HttpResponse(status, headers, b""), keep
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY:
            raise ValueError(f"an answer of {length} bytes is over {MAX_BODY}")
        body = await reader.readexactly(length)
    else:
        body = await reader.read(MAX_BODY)
        keep = False
    return HttpResponse(status, headers, body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    size_total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        size_total += size
        if size_total > MAX_BODY:
            raise ValueError(f"an answer over {MAX_BODY} bytes")
        parts.append((await reader.readexactly(size + 2))[:-2])
