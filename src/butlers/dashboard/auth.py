"""Who may use the API, and the headers every response carries.

- Without a token (the default) the dashboard listens on 127.0.0.1 only, and
  answers only requests whose `Host` is a loopback name (a DNS-rebinding page
  cannot reach it under another name).
- With `BUTLERS_DASHBOARD_TOKEN`, every `/api/*` route but `/api/health` and
  `/api/auth/status` needs `Authorization: Bearer <token>` or the HttpOnly,
  SameSite=Strict session cookie the login page sets (a signed expiry, never
  the token itself).
- Every mutation (POST, PUT, PATCH, DELETE) not authenticated by a bearer token
  needs the `X-Butlers-CSRF` header, which a cross-site form cannot send, and a
  same-origin (or allowed CORS) `Origin` when the browser sends one.
- Every response carries `Content-Security-Policy: default-src 'self'` and
  friends.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from butlers.dashboard.errors import error_response

SESSION_COOKIE = "butlers_dashboard_session"
CSRF_HEADER = "x-butlers-csrf"
SESSION_SECONDS = 12 * 3600
MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OPEN_PATHS = frozenset({"/api/health", "/api/auth/status"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; "
        b"form-action 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


def session_value(token: str, expires: int) -> str:
    signature = hmac.new(token.encode(), f"v1.{expires}".encode(), hashlib.sha256).hexdigest()
    return f"v1.{expires}.{signature}"


def valid_session(token: str, value: str, now: float | None = None) -> bool:
    try:
        version, expires_text, _signature = value.split(".", 2)
        expires = int(expires_text)
    except ValueError:
        return False
    if version != "v1" or expires < (now or time.time()):
        return False
    return hmac.compare_digest(session_value(token, expires), value)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}


def _cookie(headers: dict[str, str], name: str) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel else None


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        cors_origins: Iterable[str] = (),
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.token = token
        self.cors_origins = frozenset(cors_origins)
        self.allowed_hosts = LOOPBACK_NAMES | frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path: str = scope["path"]
        method: str = scope["method"]
        state = scope.setdefault("state", {})
        if self.token is None and _host_name(headers.get("host", "")) not in self.allowed_hosts:
            await self._deny(scope, receive, send, 400, "VALIDATION_ERROR", "unknown Host header")
            return
        on_api = path.startswith("/api/") or path == "/api"
        bearer = self._bearer(headers)
        if self.token is None:
            state["actor"] = "local"
        elif bearer is not None and hmac.compare_digest(bearer, self.token):
            state["actor"] = "token"
        elif self._session_ok(headers):
            state["actor"] = "session"
        elif on_api and path not in OPEN_PATHS:
            reason = "invalid bearer token" if bearer is not None else "authentication required"
            await self._deny(scope, receive, send, 401, "UNAUTHORIZED", reason)
            return
        if method in MUTATIONS and (on_api or path in ("/login", "/logout")):
            problem = self._csrf_problem(scope, headers, by_bearer=state.get("actor") == "token")
            if problem:
                await self._deny(scope, receive, send, 403, "FORBIDDEN", problem)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _bearer(headers: dict[str, str]) -> str | None:
        value = headers.get("authorization", "")
        scheme, _, credential = value.partition(" ")
        return credential.strip() if scheme.lower() == "bearer" and credential.strip() else None

    def _session_ok(self, headers: dict[str, str]) -> bool:
        value = _cookie(headers, SESSION_COOKIE)
        return bool(value and self.token and valid_session(self.token, value))

    def _csrf_problem(
        self, scope: Scope, headers: dict[str, str], *, by_bearer: bool
    ) -> str | None:
        origin = headers.get("origin")
        if origin and origin != "null":
            own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
            if origin != own and origin not in self.cors_origins:
                return f"cross-origin request from {origin} refused"
        elif origin == "null":
            return "requests from an opaque origin are refused"
        if by_bearer or scope["path"] in ("/login", "/logout"):
            return None
        if not headers.get(CSRF_HEADER):
            return f"this request changes data and needs the {CSRF_HEADER} header"
        return None

    @staticmethod
    async def _deny(
        scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
    ) -> None:
        extra = {"WWW-Authenticate": 'Bearer realm="butlers"'} if status == 401 else None
        response = error_response(status, code, message, headers=extra)
        await response(scope, receive, send)


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _v in message.get("headers") or []}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message = {**message, "headers": [*(message.get("headers") or []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def safe_next(target: str | None) -> str:
    """Only same-site paths may be redirected to after a login."""
    if not target:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target
