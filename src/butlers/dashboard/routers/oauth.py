"""The Google OAuth bootstrap (seed 003): app credentials, consent, callback, status.

The app's credentials and the grant live in the shared secrets store
(`oauth.google.CLIENT_ID`, ...), so every butler's calendar module reads them. Google's
endpoints and the callback URI are settings (`BUTLERS_GOOGLE_AUTH_URL`,
`BUTLERS_GOOGLE_TOKEN_URL`, `BUTLERS_GOOGLE_REDIRECT_URI`).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, Field

from butlers.dashboard.context import Ctx, Dashboard, actor
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import ValidationFailed
from butlers.oauth import google
from butlers.secretbox import KeyringError
from butlers.stores.secrets import SecretInputError, SecretStore

router = APIRouter(tags=["oauth"])
CALLBACK_PATH = "/api/oauth/google/callback"
State = Literal[
    "connected",
    "not_configured",
    "expired",
    "missing_scope",
    "redirect_uri_mismatch",
    "unapproved_tester",
    "unknown_error",
]


class OAuthStatus(BaseModel):
    state: State
    connected: bool
    remediation: str
    detail: str | None = None
    scopes: list[str] = []
    redirect_uri: str


class OAuthCredentials(BaseModel):
    client_id_set: bool
    client_secret_set: bool
    refresh_token_set: bool
    scopes: list[str] = []


class AppCredentials(BaseModel):
    client_id: str = Field(min_length=1, max_length=512)
    client_secret: str = Field(min_length=1, max_length=512)


class OAuthStart(BaseModel):
    url: str
    state: str
    expires_in: int


class OAuthConnected(BaseModel):
    connected: bool
    scopes: list[str]


def redirect_uri(dashboard: Dashboard, request: Request) -> str:
    configured = dashboard.settings.google.redirect_uri
    return configured or str(request.base_url).rstrip("/") + CALLBACK_PATH


async def _values(store: SecretStore, dashboard: Dashboard) -> dict[str, str | None]:
    keyring = dashboard.shared.keys.keyring()
    result: dict[str, str | None] = {}
    for key in google.ALL_KEYS:
        result[key] = await store.value(key, keyring) if keyring else None
    return result


async def _audit(
    dashboard: Dashboard, request: Request, operation: str, error: str | None = None
) -> None:
    await dashboard.audit.record(
        actor=actor(request),
        butler=None,
        operation=operation,
        target="shared:google-oauth",
        request={},
        ok=error is None,
        error=error,
        client=request.client.host if request.client else None,
    )


@router.get("/api/oauth/google/credentials", response_model=ApiResponse[OAuthCredentials])
async def get_credentials(dashboard: Ctx) -> dict[str, Any]:
    """Which parts of the Google credentials are stored (flags, never values)."""
    store = await dashboard.shared.store()
    stored = {m.key for m in [await store.get(k) for k in google.ALL_KEYS] if m and m.is_set}
    scopes = (await _values(store, dashboard))[google.SCOPES] if google.SCOPES in stored else None
    return ok(
        OAuthCredentials(
            client_id_set=google.CLIENT_ID in stored,
            client_secret_set=google.CLIENT_SECRET in stored,
            refresh_token_set=google.REFRESH_TOKEN in stored,
            scopes=(scopes or "").split(),
        )
    )


@router.put("/api/oauth/google/credentials", response_model=ApiResponse[OAuthCredentials])
async def put_credentials(body: AppCredentials, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Store the OAuth client's id and secret (a stored grant is kept)."""
    try:
        keyring = dashboard.shared.keys.require(reload=True)
        store = await dashboard.shared.store()
        for key, value, what in (
            (google.CLIENT_ID, body.client_id, "Google OAuth client id"),
            (google.CLIENT_SECRET, body.client_secret, "Google OAuth client secret"),
        ):
            await store.put(
                key,
                keyring=keyring,
                value=value,
                category=google.CATEGORY,
                description=what,
                actor=actor(request),
            )
    except (KeyringError, SecretInputError) as exc:
        await _audit(dashboard, request, "oauth.credentials.put", str(exc))
        raise ValidationFailed(str(exc)) from None
    await _audit(dashboard, request, "oauth.credentials.put")
    return await get_credentials(dashboard)


@router.delete("/api/oauth/google/credentials", response_model=ApiResponse[OAuthCredentials])
async def delete_credentials(request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Forget the app credentials and the grant."""
    store = await dashboard.shared.store()
    for key in google.ALL_KEYS:
        await store.delete(key)
    dashboard.oauth.last_failure = None
    await _audit(dashboard, request, "oauth.credentials.delete")
    return await get_credentials(dashboard)


@router.get(
    "/api/oauth/google/start",
    response_model=ApiResponse[OAuthStart],
    responses={302: {"description": "to Google's consent page (redirect=true)"}},
)
async def start(
    request: Request,
    dashboard: Ctx,
    redirect: bool = Query(True, description="302 to Google (true) or the URL as JSON"),
) -> Any:
    """Begin consent: a single-use CSRF state (10 minutes), offline access, the consent
    prompt, the Calendar scope."""
    store = await dashboard.shared.store()
    values = await _values(store, dashboard)
    if not values[google.CLIENT_ID] or not values[google.CLIENT_SECRET]:
        raise ValidationFailed(
            "no Google OAuth client stored: PUT /api/oauth/google/credentials with the "
            "client id and secret first (dashboard: Secrets → Google)"
        )
    uri = redirect_uri(dashboard, request)
    state = dashboard.oauth.start(actor(request), uri, json=not redirect)
    url = google.authorization_url(
        dashboard.settings.google.auth_url,
        str(values[google.CLIENT_ID]),
        uri,
        state,
        google.CALENDAR_SCOPES,
    )
    if redirect:
        return RedirectResponse(url, status_code=302)
    return ok(OAuthStart(url=url, state=state, expires_in=int(dashboard.oauth.ttl)))


def _finish(json: bool, connected: OAuthConnected | None, error: str | None) -> Any:
    if json:
        if error:
            raise ValidationFailed(error)
        return ok(connected)
    target = "/secrets?oauth=connected" if error is None else "/secrets?oauth=error"
    return RedirectResponse(target, status_code=302)


@router.get(
    CALLBACK_PATH,
    response_model=ApiResponse[OAuthConnected],
    responses={302: {"description": "back to the dashboard's Secrets page"}},
)
async def callback(
    request: Request,
    dashboard: Ctx,
    state: str = Query(..., max_length=200),
    code: str | None = Query(None, max_length=4096),
    error: str | None = Query(None, max_length=200),
) -> Any:
    """Google's answer: the state is checked and consumed, the code exchanged, and the
    refresh token stored in the shared secrets store."""
    pending = dashboard.oauth.consume(state)
    if pending is None:
        raise ValidationFailed(
            "unknown or expired OAuth state (each consent link works once, for 10 "
            "minutes): start again from the dashboard (Secrets → Google → Connect)"
        )
    started = time.monotonic()
    if error or not code:
        kind = (
            "unapproved_tester"
            if error == "access_denied"
            else ("redirect_uri_mismatch" if error == "redirect_uri_mismatch" else "unknown_error")
        )
        detail = f"Google answered {error or 'no code'}"
        dashboard.oauth.fail(kind, detail)
        await _audit(dashboard, request, "oauth.callback", detail)
        return _finish(pending.json, None, f"{detail}: {REMEDIATION[kind]}")
    store = await dashboard.shared.store()
    values = await _values(store, dashboard)
    try:
        grant = await google.exchange_code(
            dashboard.settings.google.token_url,
            str(values[google.CLIENT_ID]),
            str(values[google.CLIENT_SECRET]),
            code,
            pending.redirect_uri,
        )
        if grant.refresh_token is None:
            raise google.OAuthError(
                "no_refresh_token", "Google sent no refresh token (offline access not granted)"
            )
        keyring = dashboard.shared.keys.require(reload=True)
        await store.put(
            google.REFRESH_TOKEN,
            keyring=keyring,
            value=grant.refresh_token,
            category=google.CATEGORY,
            description="Google OAuth refresh token",
            actor=pending.actor,
        )
        await store.put(
            google.SCOPES,
            keyring=keyring,
            value=" ".join(grant.scopes) or "-",
            category=google.CATEGORY,
            description="scopes Google granted",
            is_sensitive=False,
            actor=pending.actor,
        )
    except google.OAuthError as exc:
        kind = "redirect_uri_mismatch" if exc.error == "redirect_uri_mismatch" else "unknown_error"
        dashboard.oauth.fail(kind, str(exc))
        await _audit(dashboard, request, "oauth.callback", str(exc))
        return _finish(pending.json, None, f"the code exchange failed ({exc})")
    dashboard.oauth.last_failure = None
    await dashboard.audit.record(
        actor=pending.actor,
        butler=None,
        operation="oauth.callback",
        target="shared:google-oauth",
        request={"scopes": list(grant.scopes)},
        ok=True,
        duration_ms=round((time.monotonic() - started) * 1000),
        client=request.client.host if request.client else None,
    )
    return _finish(pending.json, OAuthConnected(connected=True, scopes=list(grant.scopes)), None)


REMEDIATION: dict[str, str] = {
    "connected": "Nothing to do: the calendar uses this grant.",
    "not_configured": (
        "Create an OAuth client (Google Cloud console → APIs & Services → Credentials → "
        "OAuth client ID, type Web application) with the redirect URI below, store its id "
        "and secret (Secrets → Google), then Connect."
    ),
    "not_connected": "Connect: open /api/oauth/google/start and consent.",
    "expired": (
        "Google no longer honours the stored grant (revoked, unused for six months, or "
        "seven days old while the consent screen is in Testing): Connect again."
    ),
    "missing_scope": (
        "The grant lacks the Calendar scope: Connect again and tick every permission "
        "Google asks for."
    ),
    "redirect_uri_mismatch": (
        "The redirect URI below is not among the OAuth client's Authorized redirect URIs: "
        "add it exactly (or set BUTLERS_GOOGLE_REDIRECT_URI to the one registered), then "
        "Connect again."
    ),
    "unapproved_tester": (
        "Consent was refused: while the consent screen is in Testing, add your Google "
        "account under OAuth consent screen → Test users (or publish the app), then "
        "Connect again."
    ),
    "unknown_error": "Check the detail, the client id and secret, and the dashboard's log.",
}


def _status(
    state: str, uri: str, detail: str | None = None, scopes: tuple[str, ...] = ()
) -> dict[str, Any]:
    shown: State = "not_configured" if state == "not_connected" else state  # type: ignore[assignment]
    return ok(
        OAuthStatus(
            state=shown,
            connected=state == "connected",
            remediation=REMEDIATION[state],
            detail=detail,
            scopes=list(scopes),
            redirect_uri=uri,
        )
    )


@router.get("/api/oauth/status", response_model=ApiResponse[OAuthStatus])
async def status(request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Always 200 (safe to poll): app credentials stored, grant stored, and a refresh
    probe against Google's token endpoint checking the Calendar scope."""
    uri = redirect_uri(dashboard, request)
    try:
        values = await _values(await dashboard.shared.store(), dashboard)
    except KeyringError as exc:
        return _status("unknown_error", uri, str(exc))
    if not values[google.CLIENT_ID] or not values[google.CLIENT_SECRET]:
        return _status("not_configured", uri)
    failure = dashboard.oauth.last_failure
    if not values[google.REFRESH_TOKEN]:
        if failure is not None:
            return _status(failure.state, uri, failure.detail)
        return _status("not_connected", uri, "no grant stored yet")
    try:
        grant = await google.refresh(
            dashboard.settings.google.token_url,
            str(values[google.CLIENT_ID]),
            str(values[google.CLIENT_SECRET]),
            str(values[google.REFRESH_TOKEN]),
        )
    except google.OAuthError as exc:
        state = "expired" if exc.error == "invalid_grant" else "unknown_error"
        return _status(state, uri, str(exc))
    scopes = grant.scopes or tuple((values[google.SCOPES] or "").split())
    if not set(google.CALENDAR_SCOPES) <= set(scopes):
        return _status("missing_scope", uri, f"granted: {' '.join(scopes) or 'none'}", scopes)
    return _status("connected", uri, None, scopes)
