"""The Google OAuth client against a local authorization server (Authlib): the code
exchange, and access tokens from the stored grant, refreshed when they expire."""

import time

import httpx2 as httpx
import pytest

from butlers.oauth import google
from tests.support.oauth_server import endpoints, google_stand_in

REDIRECT = "http://127.0.0.1:9/api/oauth/google/callback"


async def test_a_stored_grant_gives_fresh_access_tokens_until_it_is_revoked() -> None:
    async with google_stand_in() as server:
        urls = endpoints(server)
        client = server.register(REDIRECT)
        url = google.authorization_url(urls["auth_url"], client.client_id, REDIRECT, "st",
                                       google.CALENDAR_SCOPES)  # fmt: skip
        async with httpx.AsyncClient() as http:
            consent = await http.get(url)
        assert consent.status_code == 302, consent.text
        asked = server.authorize_requests[-1]
        assert (asked["access_type"], asked["prompt"]) == ("offline", "consent")
        code = httpx.URL(consent.headers["location"]).params["code"]
        grant = await google.exchange_code(urls["token_url"], client.client_id,
                                           client.client_secret, code, REDIRECT)  # fmt: skip
        assert grant.refresh_token and grant.scopes == google.CALENDAR_SCOPES
        stored = {google.CLIENT_ID: client.client_id, google.CLIENT_SECRET: client.client_secret,
                  google.REFRESH_TOKEN: grant.refresh_token}  # fmt: skip

        async def lookup(name: str) -> str | None:
            return stored.get(name)

        later = [0.0]
        tokens = google.GoogleTokens(
            lookup, urls["token_url"], clock=lambda: time.time() + later[0]
        )
        first = await tokens.access_token()
        assert server.is_live(first)
        assert await tokens.access_token() == first  # reused while valid
        refreshes = len(server.token_requests)
        later[0] = 3600.0  # an hour on: the access token expired
        second = await tokens.access_token()
        assert second != first and server.is_live(second)
        assert server.token_requests[refreshes]["grant_type"] == "refresh_token"
        server.revoke_all()
        later[0] = 7200.0
        with pytest.raises(google.OAuthError) as refused:
            await tokens.access_token()
        assert refused.value.error == "invalid_grant"


async def test_no_grant_is_not_configured() -> None:
    async def nothing(name: str) -> str | None:
        return None

    with pytest.raises(google.OAuthError, match="not stored"):
        await google.GoogleTokens(nothing, "http://127.0.0.1:9/token").access_token()
