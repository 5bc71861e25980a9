"""The login page (token mode): a form that trades the token for a session cookie."""

from __future__ import annotations

import hmac
import html
import time
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel

from butlers.dashboard.auth import SESSION_COOKIE, SESSION_SECONDS, safe_next, session_value
from butlers.dashboard.context import Ctx, actor
from butlers.dashboard.envelopes import ApiResponse, ok

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
<p>The token is the value of <code>BUTLERS_DASHBOARD_TOKEN</code> (in a cluster: the
<code>token</code> key of the dashboard's Secret).</p></main></body></html>
"""


class AuthStatus(BaseModel):
    token_required: bool
    authenticated: bool
    actor: str | None


@router.get("/api/auth/status", response_model=ApiResponse[AuthStatus], tags=["auth"])
async def auth_status(request: Request, dashboard: Ctx) -> dict[str, object]:
    """Whether the API needs a token, and whether this request carries valid credentials."""
    who = actor(request)
    authenticated = who != "anonymous"
    return ok(
        AuthStatus(
            token_required=dashboard.settings.token is not None,
            authenticated=authenticated,
            actor=who if authenticated else None,
        )
    )


@router.get("/login", include_in_schema=False)
async def login_page(request: Request, dashboard: Ctx) -> Response:
    target = safe_next(request.query_params.get("next"))
    if dashboard.settings.token is None:
        return RedirectResponse(target, status_code=303)
    return HTMLResponse(PAGE.format(message="", next=html.escape(target)))


@router.post("/login", include_in_schema=False)
async def login(request: Request, dashboard: Ctx) -> Response:
    body = await request.body()
    form = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"))
    target = safe_next((form.get("next") or ["/"])[0])
    token = dashboard.settings.token
    given = (form.get("token") or [""])[0]
    if token is None:
        return RedirectResponse(target, status_code=303)
    if not hmac.compare_digest(given.encode(), token.encode()):
        page = PAGE.format(
            message='<p role="alert">That token is not valid.</p>', next=html.escape(target)
        )
        return HTMLResponse(page, status_code=401)
    response = RedirectResponse(target, status_code=303)
    expires = int(time.time()) + SESSION_SECONDS
    response.set_cookie(
        SESSION_COOKIE,
        session_value(token, expires),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=_https(request),
        path="/",
    )
    return response


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip() == "https"
