"""How the calendar module logs in to its CalDAV server: the one place it reads credentials.

`auth: basic` (the default): the URL, username and password come from the credentials
the config names, looked up in the butler's secrets store, then the shared store, then
the environment. `auth: google`: a bearer token from the Google grant the dashboard
stored, fetched (and refreshed) before each request, for Google's CalDAV endpoint.
"""

from __future__ import annotations

from typing import Any

from butlers.modules.base import ModuleContext, ModuleError
from butlers.modules.calendar.caldav import CalDavClient, CalDavError
from butlers.oauth.google import OAuthError

GOOGLE_CALDAV = "https://apidata.googleusercontent.com/caldav/v2/"


def caldav_client(ctx: ModuleContext, config: Any) -> CalDavClient:
    url = config.url or (ctx.credential(config.url_env) if config.url_env else None)
    if not url:
        raise ModuleError("config", "module 'calendar': set `url` or `urlEnv` (the CalDAV server)")
    if config.auth == "google":
        tokens = ctx.google_tokens()

        async def token() -> str:
            try:
                return await tokens.access_token()
            except OAuthError as exc:
                raise CalDavError(f"the Google grant gave no access token: {exc}") from None

        return CalDavClient(url, None, None, config.timeout_seconds, token=token)
    username = ctx.credential(config.username_env) if config.username_env else None
    password = ctx.credential(config.password_env) if config.password_env else None
    return CalDavClient(url, username, password, config.timeout_seconds)
