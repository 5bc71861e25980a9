"""Google OAuth 2.0: the authorization URL, the code exchange, and fresh access tokens
from the stored grant (the refresh flow), against configurable endpoints.

The grant lives in the shared secrets store under `GOOGLE_OAUTH_*` (the dashboard's
bootstrap writes it; see `CLIENT_ID` and friends). A module that calls Google builds
`GoogleTokens(lookup, token_url)` with `ModuleContext.fresh_credential` as `lookup`
and asks `await tokens.access_token()` before each request: the token is reused until a
minute before it expires, then refreshed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx2 as httpx

CLIENT_ID = "GOOGLE_OAUTH_CLIENT_ID"
CLIENT_SECRET = "GOOGLE_OAUTH_CLIENT_SECRET"
REFRESH_TOKEN = "GOOGLE_OAUTH_REFRESH_TOKEN"
SCOPES = "GOOGLE_OAUTH_SCOPES"  # the scopes granted, space-separated (not secret)
ALL_KEYS = (CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN, SCOPES)
CATEGORY = "google-oauth"
# What the calendar needs: Google's CalDAV endpoint takes this scope (read and write).
CALENDAR_SCOPES = ("https://www.googleapis.com/auth/calendar",)
TIMEOUT = 10.0
EARLY_REFRESH_SECONDS = 60


class OAuthError(Exception):
    """The provider refused (`error` as RFC 6749 names it), or could not be reached."""

    def __init__(self, error: str, description: str = "") -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description


@dataclass(frozen=True)
class Grant:
    access_token: str
    expires_at: float  # time.time()
    scopes: tuple[str, ...]
    refresh_token: str | None = field(default=None, repr=False)


def authorization_url(
    auth_url: str, client_id: str, redirect_uri: str, state: str, scopes: Sequence[str]
) -> str:
    """Where the browser goes to consent: offline access (a refresh token) and the consent
    prompt every time (Google returns a refresh token only on consent)."""
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": " ".join(scopes),
            "state": state,
            "access_type": "offline",
            "prompt": "consent",
            "include_granted_scopes": "true",
        }
    )
    return f"{auth_url}{'&' if '?' in auth_url else '?'}{query}"


async def _token_request(token_url: str, form: dict[str, str], timeout: float) -> Grant:
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(
                token_url, data=form, headers={"Accept": "application/json"}
            )
    except httpx.HTTPError as exc:
        raise OAuthError("unreachable", f"{token_url}: {exc.__class__.__name__}: {exc}") from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if response.status_code != 200 or "access_token" not in body:
        raise OAuthError(
            str(body.get("error") or f"http_{response.status_code}"),
            str(body.get("error_description") or ""),
        )
    scope = body.get("scope")
    return Grant(
        access_token=str(body["access_token"]),
        expires_at=time.time() + float(body.get("expires_in") or 3600),
        scopes=tuple(str(scope).split()) if scope else (),
        refresh_token=str(body["refresh_token"]) if body.get("refresh_token") else None,
    )


async def exchange_code(
    token_url: str,
    client_id: str,
    client_secret: str,
    code: str,
    redirect_uri: str,
    *,
    timeout: float = TIMEOUT,
) -> Grant:
    """The authorization code for tokens (the redirect URI must be the one sent to consent)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "client_secret": client_secret,
    }
    return await _token_request(token_url, form, timeout)


async def refresh(
    token_url: str,
    client_id: str,
    client_secret: str,
    refresh_token: str,
    *,
    timeout: float = TIMEOUT,
) -> Grant:
    """A fresh access token for the stored refresh token."""
    form = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": client_id,
        "client_secret": client_secret,
    }
    return await _token_request(token_url, form, timeout)


Lookup = Callable[[str], Awaitable[str | None]]


class GoogleTokens:
    """Access tokens from the stored grant, refreshed when (nearly) expired."""

    def __init__(
        self,
        lookup: Lookup,
        token_url: str,
        *,
        timeout: float = TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._lookup = lookup
        self._clock = clock
        self._token_url = token_url
        self._timeout = timeout
        self._grant: Grant | None = None
        self._refresh_token: str | None = None
        self._lock = asyncio.Lock()

    async def access_token(self) -> str:
        """A valid access token; OAuthError("not_configured", ...) when there is no grant,
        OAuthError("invalid_grant", ...) when Google no longer honours it."""
        async with self._lock:
            values = {k: await self._lookup(k) for k in (CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN)}
            missing = [k for k, v in values.items() if not v]
            if missing:
                raise OAuthError(
                    "not_configured",
                    f"{', '.join(missing)} not stored: connect Google in the dashboard "
                    "(Secrets → Google)",
                )
            grant = self._grant
            fresh = grant is not None and grant.expires_at - EARLY_REFRESH_SECONDS > self._clock()
            if grant is None or not fresh or self._refresh_token != values[REFRESH_TOKEN]:
                self._refresh_token = values[REFRESH_TOKEN]
                grant = await refresh(
                    self._token_url,
                    str(values[CLIENT_ID]),
                    str(values[CLIENT_SECRET]),
                    str(values[REFRESH_TOKEN]),
                    timeout=self._timeout,
                )
                self._grant = grant
            return grant.access_token
