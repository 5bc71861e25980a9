"""Signing in: the login page (the token, or a one-time login link) and signing out.

`GET /login?code=...` redeems a one-time code that `butlers up` / `butlers dashboard
--open` printed or opened; `POST /login` takes the token from the form. Both set the
session cookie (an opaque id the dashboard holds: `logins.py`) and are throttled per
client. `POST /logout` forgets the session server-side.
"""

from __future__ import annotations

import hmac
import html
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel

from butlers.dashboard.auth import SESSION_COOKIE, client_of, cookie_of, headers_of, safe_next
from butlers.dashboard.context import actor
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.logins import Logins

router = APIRouter()
MAX_FORM_BYTES = 8192

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Butlers dashboard: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/svg+xml" href="/favicon.svg"></head>
<body><main><h1>Butlers dashboard</h1>{message}
<form method="post" action="/login">
<label for="token">Dashboard token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form>
<p>On the machine that runs <code>butlers up</code>, <code>butlers dashboard --open</code>
opens a one-time login link. The token is the user's token (<code>token</code> in
<code>ecosystem.json</code>), or <code>BUTLERS_DASHBOARD_TOKEN</code> (in a cluster: the
<code>token</code> key of the dashboard's Secret).</p></main></body></html>
"""


class AuthStatus(BaseModel):
    token_required: bool  # a login is needed (false only with --no-login)
    authenticated: bool
    actor: str | None  # who this request acts as, e.g. "alice (session 3f9c2a1b)"


@router.get("/api/auth/status", response_model=ApiResponse[AuthStatus], tags=["auth"])
async def auth_status(request: Request) -> dict[str, object]:
    """Whether the API needs a login, and whether this request carries valid credentials."""
    who = actor(request)
    authenticated = who != "anonymous"
    return ok(
        AuthStatus(
            token_required=request.app.state.login_required,
            authenticated=authenticated,
            actor=who if authenticated else None,
        )
    )


def _page(message: str, target: str, status: int = 200) -> HTMLResponse:
    text = f'<p role="alert">{html.escape(message)}</p>' if message else ""
    return HTMLResponse(PAGE.format(message=text, next=html.escape(target)), status_code=status)


def _throttled(logins: Logins, request: Request, target: str) -> HTMLResponse | None:
    wait = logins.throttle.retry_after(client_of(request.scope))
    if not wait:
        return None
    seconds = max(1, round(wait + 0.5))
    page = _page(f"Too many failed attempts: try again in {seconds} s.", target, 429)
    page.headers["Retry-After"] = str(seconds)
    return page


@router.get("/login", include_in_schema=False)
async def login_page(request: Request) -> Response:
    target = safe_next(request.query_params.get("next"))
    if not request.app.state.login_required:
        return RedirectResponse(target, status_code=303)
    code = request.query_params.get("code")
    if code is None:
        return _page("", target)
    logins: Logins = request.app.state.logins
    refused = _throttled(logins, request, target)
    if refused is not None:
        return refused
    secret = request.app.state.login_secret()
    problem = "no login token is known yet" if secret is None else logins.redeem(secret, code)
    if problem is not None:
        logins.throttle.failed(client_of(request.scope))
        hint = "; run `butlers dashboard --open` for a new link, or sign in with the token"
        return _page(problem + hint, target, 401)
    return _signed_in(request, logins, target)


@router.post("/login", include_in_schema=False)
async def login(request: Request) -> Response:
    body = await request.body()
    form = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"))
    target = safe_next((form.get("next") or ["/"])[0])
    if not request.app.state.login_required:
        return RedirectResponse(target, status_code=303)
    logins: Logins = request.app.state.logins
    refused = _throttled(logins, request, target)
    if refused is not None:
        return refused
    secret = request.app.state.login_secret()
    given = (form.get("token") or [""])[0]
    if secret is None or not hmac.compare_digest(given.encode(), secret.encode()):
        logins.throttle.failed(client_of(request.scope))
        return _page("That token is not valid.", target, 401)
    return _signed_in(request, logins, target)


def _signed_in(request: Request, logins: Logins, target: str) -> Response:
    client = client_of(request.scope)
    logins.throttle.succeeded(client)
    session_id = logins.open(request.app.state.identity, client)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=int(logins.session_seconds),
        httponly=True,
        samesite="strict",
        secure=_https(request),
        path="/",
    )
    return response


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    logins: Logins = request.app.state.logins
    logins.close(cookie_of(headers_of(request.scope), SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip() == "https"
