"""Who may use the API, and the headers every response carries.

- Every `/api/*` route but `/api/health`, `/api/auth/status` and the OAuth callback
  (authenticated by its single-use state, see `routers/oauth.py`) needs
  `Authorization: Bearer <token>` or the HttpOnly, SameSite=Strict session cookie of
  a login (`logins.py`: a login form with the token, or a one-time login link). The
  token is `BUTLERS_DASHBOARD_TOKEN`, else the user's token of the ecosystem (a local
  ecosystem's `ecosystem.json`). On loopback too: other local accounts reach the port.
- Only with `login=False` (`--no-login`, which warns) does the dashboard answer
  without credentials, on loopback only.
- On a loopback address (and always without login) only requests whose `Host` is a
  loopback name (or an allowed host) are answered: a DNS-rebinding page cannot reach
  the dashboard under another name.
- Failed attempts (a wrong bearer, token or code) are throttled per client address.
- Every mutation (POST, PUT, PATCH, DELETE) not authenticated by a bearer token
  needs the `X-Butlers-CSRF` header, which a cross-site form cannot send, and a
  same-origin (or allowed CORS) `Origin` when the browser sends one.
- Every response carries `Content-Security-Policy: default-src 'self'` and
  friends.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from butlers.dashboard.errors import error_response
from butlers.dashboard.logins import Logins

SESSION_COOKIE = "butlers_dashboard_session"
CSRF_HEADER = "x-butlers-csrf"
NO_LOGIN_ACTOR = "local (no login)"
MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The OAuth callback arrives from the provider's page, which a SameSite=Strict cookie
# does not follow: its credential is the single-use `state` a signed-in user started.
OPEN_PATHS = frozenset({"/api/health", "/api/auth/status", "/api/oauth/google/callback"})
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


def client_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def headers_of(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}


def cookie_of(headers: dict[str, str], name: str) -> str | None:
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
        logins: Logins,
        secret: Callable[[], str | None],
        identity: str,
        login: bool = True,
        check_host: bool = True,
        cors_origins: Iterable[str] = (),
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.logins = logins
        self.secret = secret
        self.identity = identity
        self.login = login
        self.check_host = check_host or not login
        self.cors_origins = frozenset(cors_origins)
        self.allowed_hosts = LOOPBACK_NAMES | frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = headers_of(scope)
        path: str = scope["path"]
        method: str = scope["method"]
        state = scope.setdefault("state", {})
        if self.check_host and _host_name(headers.get("host", "")) not in self.allowed_hosts:
            await self._deny(scope, receive, send, 400, "VALIDATION_ERROR", "unknown Host header")
            return
        on_api = path.startswith("/api/") or path == "/api"
        bearer = self._bearer(headers)
        by_bearer = False
        if not self.login:
            state["actor"] = NO_LOGIN_ACTOR
        elif bearer is not None:
            client = client_of(scope)
            wait = self.logins.throttle.retry_after(client)
            if wait:
                await self._throttled(scope, receive, send, wait)
                return
            secret = self.secret()
            if secret is not None and hmac.compare_digest(bearer.encode(), secret.encode()):
                state["actor"] = f"{self.identity} (bearer token)"
                by_bearer = True
                self.logins.throttle.succeeded(client)
            else:
                self.logins.throttle.failed(client)
                if on_api and path not in OPEN_PATHS:
                    await self._deny(scope, receive, send, 401, "UNAUTHORIZED", "invalid token")
                    return
        elif (session := self.logins.get(cookie_of(headers, SESSION_COOKIE))) is not None:
            state["actor"] = f"{session.identity} (session {session.label})"
        elif on_api and path not in OPEN_PATHS:
            message = "authentication required: sign in at /login"
            await self._deny(scope, receive, send, 401, "UNAUTHORIZED", message)
            return
        if method in MUTATIONS and (on_api or path in ("/login", "/logout")):
            problem = self._csrf_problem(scope, headers, by_bearer=by_bearer)
            if problem:
                await self._deny(scope, receive, send, 403, "FORBIDDEN", problem)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _throttled(scope: Scope, receive: Receive, send: Send, wait: float) -> None:
        seconds = max(1, round(wait + 0.5))
        response = error_response(
            429,
            "RATE_LIMITED",
            f"too many failed sign-in attempts from this address; try again in {seconds} s",
            headers={"Retry-After": str(seconds)},
        )
        await response(scope, receive, send)

    @staticmethod
    def _bearer(headers: dict[str, str]) -> str | None:
        value = headers.get("authorization", "")
        scheme, _, credential = value.partition(" ")
        return credential.strip() if scheme.lower() == "bearer" and credential.strip() else None

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
