"""The ASGI app of a butler: MCP at /mcp (streamable HTTP) and /sse, plus probes,
behind the auth gate (Host, Origin, bearer token; the probes stay open)."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping

from fastmcp import FastMCP
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from butlers.auth.http import AuthGate, HostPolicy
from butlers.auth.tokens import TokenBook
from butlers.daemon.direct import DirectToolCalls
from butlers.daemon.http_limits import SESSION_IDLE_TIMEOUT, BodyLimit

ReadyCheck = Callable[[], Awaitable[tuple[bool, dict[str, object]]]]


def build_http_app(
    mcp: FastMCP,
    name: str,
    ready_check: ReadyCheck,
    *,
    book: TokenBook,
    hosts: HostPolicy,
    session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
    direct_calls: bool = True,
    webhooks: Mapping[str, Callable[[Request], Awaitable[Response]]] | None = None,
) -> Starlette:
    """`direct_calls=False` leaves every request to the SDK (tests compare the two);
    `webhooks` are modules' push endpoints (POST), authenticated by their handlers."""
    webhooks = webhooks or {}
    streamable = mcp.http_app(path="/mcp", session_idle_timeout=session_idle_timeout)
    endpoint = next(
        r.endpoint for r in streamable.routes if isinstance(r, Route) and r.path == "/mcp"
    )
    sse = mcp.http_app(path="/sse", transport="sse")

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "butler": name})

    # Which run of the butler answers: a watcher that sees it change knows the butler
    # restarted, however quickly it came back.
    instance = secrets.token_hex(8)

    async def ready(_request: Request) -> JSONResponse:
        ok, detail = await ready_check()
        body: dict[str, object] = {
            "status": "ready" if ok else "not_ready",
            "butler": name,
            "instance": instance,
        }
        body.update(detail)
        return JSONResponse(body, status_code=200 if ok else 503)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        *streamable.routes,
        *sse.routes,
        *(Route(path, _live(webhooks, path), methods=["POST"]) for path in webhooks),
    ]
    # Outermost first: who is calling (Host, Origin, token) before any body is read,
    # the body within its size and deadline, then plain `tools/call`s answered directly.
    gate = Middleware(AuthGate, book=book, hosts=hosts, butler=name, webhooks=list(webhooks))
    middleware = [gate, Middleware(BodyLimit)]
    if direct_calls:
        sessions = lambda: getattr(endpoint, "session_manager", None)  # noqa: E731
        middleware.append(Middleware(DirectToolCalls, mcp=mcp, sessions=sessions))
    return Starlette(
        routes=routes,
        lifespan=streamable.router.lifespan_context,
        middleware=middleware,
    )


def _live(
    webhooks: Mapping[str, Callable[[Request], Awaitable[Response]]], path: str
) -> Callable[[Request], Awaitable[Response]]:
    """The handler `webhooks` holds for `path` when a push arrives: gone while its module
    is switched off (404), the new instance's once switched on again."""

    async def endpoint(request: Request) -> Response:
        handler = webhooks.get(path)
        if handler is None:
            return JSONResponse({"error": f"{path} is off: its module is switched off"}, 404)
        return await handler(request)

    return endpoint
