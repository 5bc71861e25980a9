"""A stand-in for Google's OAuth 2.0 authorization server, for tests only: Authlib's
RFC 6749 server (authorization-code and refresh-token grants) over Starlette, served
by uvicorn on a loopback port.

The consent page approves at once as `user` (no page to click through), granting the
scopes asked for unless `granted_scope` narrows them, or answers `deny` (an error
code such as `access_denied`) instead. A redirect URI the client did not register is
answered as Google answers it, `redirect_uri_mismatch`. `revoke_all()` makes every
refresh token invalid (`invalid_grant`, as Google answers an expired grant).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    AuthorizationServer,
    ClientMixin,
    OAuth2Error,
    OAuth2Payload,
    OAuth2Request,
    TokenMixin,
    grants,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from butlers.db.embedded import free_port

SECRET_POST = ["client_secret_basic", "client_secret_post"]


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in SECRET_POST

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code(AuthorizationCodeMixin):
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class Token(TokenMixin):
    client_id: str
    user: str
    scope: str
    access_token: str
    refresh_token: str | None
    expires_in: int
    issued_at: float = field(default_factory=time.time)
    revoked: bool = False

    def check_client(self, client: ClientMixin) -> bool:
        return client.get_client_id() == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return False

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.user

    def get_client(self) -> ClientMixin:  # pragma: no cover - not used by these grants
        raise NotImplementedError


class _Payload(OAuth2Payload):
    def __init__(self, data: dict[str, str]) -> None:
        self._data = data
        self._datalist = {k: [v] for k, v in data.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> dict[str, list[str]]:  # type: ignore[override]
        return self._datalist


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: Any, data: dict[str, str]) -> None:
        super().__init__(method=method, uri=uri, headers=headers)
        self.payload = _Payload(data)
        self._args = data

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._args


class GoogleStandIn(AuthorizationServer):
    def __init__(self, user: str = "owner@example.com") -> None:
        super().__init__()
        self.user = user
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, Code] = {}
        self.tokens: dict[str, Token] = {}
        self.granted_scope: str | None = None
        self.deny: str | None = None
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.url = ""
        self.register_token_generator("default", self._generate)
        stand_in = self

        class CodeGrant(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = SECRET_POST

            def save_authorization_code(self, code: str, request: Any) -> None:
                stand_in.codes[code] = Code(
                    code,
                    request.client.client_id,
                    request.payload.redirect_uri,
                    request.scope,
                    request.user,
                )

            def query_authorization_code(self, code: str, client: Any) -> Code | None:
                found = stand_in.codes.get(code)
                return found if found and found.client_id == client.client_id else None

            def delete_authorization_code(self, authorization_code: Code) -> None:
                stand_in.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: Code) -> str:
                return authorization_code.user

        class RefreshGrant(grants.RefreshTokenGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = SECRET_POST

            def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
                for token in stand_in.tokens.values():
                    if token.refresh_token == refresh_token and not token.revoked:
                        return token
                return None

            def authenticate_user(self, refresh_token: Token) -> str:
                return refresh_token.user

            def revoke_old_credential(self, refresh_token: Token) -> None:
                """Google keeps a refresh token valid across refreshes."""

        self.register_grant(CodeGrant)
        self.register_grant(RefreshGrant)

    # -- what a test sets up ------------------------------------------------------

    def register(self, redirect_uri: str) -> Client:
        client = Client(
            secrets.token_hex(8) + ".apps.example", secrets.token_urlsafe(24), [redirect_uri]
        )
        self.clients[client.client_id] = client
        return client

    def revoke_all(self) -> None:
        for token in self.tokens.values():
            token.revoked = True

    def is_live(self, access_token: str) -> bool:
        token = self.tokens.get(access_token)
        return token is not None and not token.revoked

    # -- AuthorizationServer -------------------------------------------------------

    def query_client(self, client_id: str) -> Client | None:
        return self.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        self.tokens[token["access_token"]] = Token(
            request.client.client_id,
            request.user,
            token.get("scope", ""),
            token["access_token"],
            token.get("refresh_token"),
            token["expires_in"],
        )

    def _generate(
        self,
        grant_type: str,
        client: Any,
        user: Any = None,
        scope: Any = None,
        expires_in: Any = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        token = {
            "token_type": "Bearer",
            "access_token": secrets.token_urlsafe(24),
            "expires_in": 3599,
            "scope": scope or "",
        }
        if include_refresh_token:
            token["refresh_token"] = "1//" + secrets.token_urlsafe(32)
        return token

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request  # already built from the Starlette request

    def create_json_request(self, request: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def handle_response(self, status: int, body: Any, headers: Any) -> Response:
        headers = dict(headers)
        if isinstance(body, dict):
            return JSONResponse(body, status_code=status, headers=headers)
        return Response(body or "", status_code=status, headers=headers)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    # -- HTTP -----------------------------------------------------------------------

    async def authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        self.authorize_requests.append(query)
        client = self.clients.get(query.get("client_id", ""))
        redirect = query.get("redirect_uri", "")
        if client is not None and not client.check_redirect_uri(redirect):
            error = {"error": "redirect_uri_mismatch", "state": query.get("state", "")}
            return RedirectResponse(f"{redirect}?{urlencode(error)}", status_code=302)
        if self.deny:
            error = {"error": self.deny, "state": query.get("state", "")}
            return RedirectResponse(f"{redirect}?{urlencode(error)}", status_code=302)
        if self.granted_scope is not None:
            query["scope"] = self.granted_scope
        oauth_request = _Request("GET", str(request.url), request.headers, query)
        try:
            grant = self.get_consent_grant(oauth_request, end_user=self.user)
        except OAuth2Error as error:
            return JSONResponse(dict(error.get_body()), status_code=400)
        return self.create_authorization_response(oauth_request, grant_user=self.user, grant=grant)

    async def token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append(form)
        return self.create_token_response(_Request("POST", str(request.url), request.headers, form))

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/o/oauth2/v2/auth", self.authorize),
                Route("/token", self.token, methods=["POST"]),
            ]
        )


@contextlib.asynccontextmanager
async def google_stand_in() -> AsyncIterator[GoogleStandIn]:
    """A running stand-in; its `url` is the base (auth at /o/oauth2/v2/auth, /token)."""
    server = GoogleStandIn()
    port = free_port()
    config = uvicorn.Config(
        server.app(), host="127.0.0.1", port=port, log_config=None, lifespan="off"
    )
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    deadline = time.monotonic() + 15
    while not uv.started:
        if task.done() or time.monotonic() > deadline:
            raise RuntimeError(f"the OAuth stand-in did not start: {task!r}")
        await asyncio.sleep(0.02)
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        uv.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


def endpoints(server: GoogleStandIn) -> dict[str, str]:
    return {"auth_url": f"{server.url}/o/oauth2/v2/auth", "token_url": f"{server.url}/token"}
