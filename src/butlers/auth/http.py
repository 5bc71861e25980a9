"""The ASGI gate in front of a butler's MCP endpoints (`/mcp`, `/sse`, `/messages/`).

In order, for every request but the probes (`/health`, `/ready`) and a module's
webhooks (a provider's pushes, which their handler authenticates with the provider's
own secret, compared in constant time):

1. `Host` must name this butler: a loopback name, an IP literal (a DNS-rebinding page
   always sends its own host name), or a configured name (the advertised URL's host,
   `BUTLERS_ALLOWED_HOSTS`, a cluster's Service names). Otherwise 403.
2. `Origin`, when a browser sends one, must be a loopback origin or a configured one
   (`BUTLERS_ALLOWED_ORIGINS`, or a configured host name). Otherwise 403.
3. The protected-resource metadata (RFC 9728) is answered without a token.
4. `Authorization: Bearer <token>` must prove an identity (`TokenBook.verify`).
   Otherwise 401 with a `WWW-Authenticate: Bearer` challenge that links the metadata,
   as the MCP authorization spec asks of a resource server (with
   `error="invalid_token"` when a token was sent but proves nothing).

5. When the server offers it (`ADMIT_KEY` in the scope: the butler's HTTP protocol),
   the connection is admitted among those holding a valid token (see
   `butlers.daemon.admission`); 503 when too many are.

The identity goes into the ASGI scope: as `scope["user"]` (the MCP SDK binds each
MCP session to the credential that opened it) and under `SCOPE_KEY` for the access
rule. Cost per request: one SHA-256 and a dict lookup; no database.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from butlers.auth.identity import Identity
from butlers.auth.middleware import SCOPE_KEY
from butlers.auth.tokens import TokenBook

log = logging.getLogger(__name__)
OPEN_PATHS = frozenset({"/health", "/ready"})
METADATA_PATH = "/.well-known/oauth-protected-resource"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
# A callable the server may put in the scope of a request on a connection not yet
# admitted: called once its token proved an identity; False means no room (503).
ADMIT_KEY = "butlers.admit"


class HostPolicy:
    """Which `Host` and `Origin` values a butler answers."""

    def __init__(self, names: Iterable[str] = (), origins: Iterable[str] = ()) -> None:
        self.names = frozenset(n.strip().lower().rstrip(".") for n in names if n.strip())
        self.origins = frozenset(o.strip().lower().rstrip("/") for o in origins if o.strip())
        # Parsing costs microseconds; clients send the same few values over and over.
        self.host_ok = lru_cache(maxsize=512)(self.host_ok)  # type: ignore[method-assign]
        self.origin_ok = lru_cache(maxsize=512)(self.origin_ok)  # type: ignore[method-assign]

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return True  # no browser omits Host; a rebinding page always sends its own
        name = _hostname(host)
        return name is not None and (_loopback_or_ip(name) or name in self.names)

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser, or a same-origin GET
        value = origin.strip().lower().rstrip("/")
        if value in self.origins:
            return True
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False  # "null" (sandboxed frames, file:), or no origin at all
        name = parts.hostname.rstrip(".")
        return _is_loopback(name) or name in self.names


def _hostname(host: str) -> str | None:
    try:
        parts = urlsplit(f"//{host.strip()}")
        parts.port  # noqa: B018 (raises on a malformed port)
    except ValueError:
        return None
    return parts.hostname.rstrip(".") if parts.hostname else None


def _is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _loopback_or_ip(name: str) -> bool:
    if _is_loopback(name):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _gate_headers(scope: Scope) -> tuple[str | None, str | None, str | None]:
    """`Host`, `Origin` and `Authorization` (the first of each), in one pass."""
    host = origin = authorization = None
    for name, value in scope.get("headers") or ():
        if name == b"host":
            if host is None:
                host = bytes(value).decode("latin-1")
        elif name == b"origin":
            if origin is None:
                origin = bytes(value).decode("latin-1")
        elif name == b"authorization" and authorization is None:
            authorization = bytes(value).decode("latin-1")
    return host, origin, authorization


class AuthGate:
    """ASGI middleware: Host and Origin checks, then the bearer token."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        book: TokenBook,
        hosts: HostPolicy,
        butler: str,
        webhooks: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.book = book
        self.hosts = hosts
        self.butler = butler
        self.open_paths = OPEN_PATHS | frozenset(webhooks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        host, origin, authorization = _gate_headers(scope)
        if not self.hosts.host_ok(host):
            await _refuse(send, 403, "forbidden", f"Host {host!r} is not served by this butler")
            return
        if not self.hosts.origin_ok(origin):
            await _refuse(send, 403, "forbidden", f"Origin {origin!r} may not call this butler")
            return
        path: str = scope["path"]
        if path.startswith(METADATA_PATH):
            await self._metadata(scope, send, host)
            return
        token = _bearer(authorization)
        identity = self.book.verify(token) if token else None
        if identity is None:
            await self._challenge(scope, send, host, invalid=token is not None)
            return
        admit = scope.get(ADMIT_KEY)
        if admit is not None and not admit():
            await _refuse(
                send, 503, "unavailable", "too many connections with a valid token are open"
            )
            return
        scope[SCOPE_KEY] = identity
        scope["user"] = _authenticated(identity)
        await self.app(scope, receive, send)

    def _resource(self, scope: Scope, host: str | None, path: str) -> str:
        endpoint = "/sse" if path.startswith(("/sse", "/messages")) else "/mcp"
        return f"{scope.get('scheme', 'http')}://{host or 'localhost'}{endpoint}"

    async def _challenge(self, scope: Scope, send: Send, host: str | None, invalid: bool) -> None:
        resource = self._resource(scope, host, scope["path"])
        base, _, endpoint = resource.rpartition("/")
        parts = ['realm="butlers"', f'resource_metadata="{base}{METADATA_PATH}/{endpoint}"']
        if invalid:
            description = "the bearer token is not valid for this butler"
            parts += ['error="invalid_token"', f'error_description="{description}"']
            body = {"error": "invalid_token", "error_description": description}
        else:
            body = {
                "error": "unauthorized",
                "error_description": "send Authorization: Bearer <token> (see `butlers status`)",
            }
        await _send_json(
            send, 401, body, [(b"www-authenticate", b"Bearer " + ", ".join(parts).encode())]
        )

    async def _metadata(self, scope: Scope, send: Send, host: str | None) -> None:
        suffix = scope["path"][len(METADATA_PATH) :] or "/mcp"
        document = {
            "resource": self._resource(scope, host, suffix),
            "bearer_methods_supported": ["header"],
            "resource_name": f"butler {self.butler}",
        }
        await _send_json(send, 200, document, [(b"cache-control", b"no-store")])


def _bearer(value: str | None) -> str | None:
    if value is None:
        return None
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


@lru_cache(maxsize=1024)
def _authenticated(identity: Identity) -> AuthenticatedUser:
    return AuthenticatedUser(_access_token(identity))


def _access_token(identity: Identity) -> AccessToken:
    # The SDK compares client_id (and issuer/subject) to bind MCP sessions to callers;
    # the token field holds the label, never the secret.
    return AccessToken(token=identity.label, client_id=identity.label, scopes=[identity.kind])


async def _refuse(send: Send, status: int, error: str, description: str) -> None:
    log.warning("refused a request: %s", description)
    await _send_json(send, status, {"error": error, "error_description": description})


async def _send_json(
    send: Send, status: int, body: object, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
