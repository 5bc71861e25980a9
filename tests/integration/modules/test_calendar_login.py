"""How the calendar module logs in to a real CalDAV server (Radicale): credentials from the
butler's secrets store over the environment, and the stored Google grant as a bearer token
(the Google side is the Authlib stand-in; a proxy in front of Radicale plays Google's CalDAV
endpoint, accepting only a live access token)."""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from fastmcp.exceptions import ToolError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from butlers.core.secrets import SHARED_TABLE
from butlers.oauth import google
from butlers.stores.secrets import SecretStore
from tests.support.oauth_server import GoogleStandIn, endpoints, google_stand_in
from tests.support.radicale import RadicaleServer, start_radicale
from tests.support.serving import served_asgi

from .conftest import ButlerFactory

CALENDAR = {"timezone": "Europe/Paris", "syncIntervalSeconds": 0}
FORWARDED = ("content-type", "depth", "if-match", "if-none-match")


@pytest.fixture(scope="module")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RadicaleServer]:
    with start_radicale(Path(tmp_path_factory.mktemp("radicale"))) as server:
        yield server


async def test_a_stored_credential_wins_over_the_environment(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    await asyncio.to_thread(radicale.make_calendar, "stored-owner", "home")
    butler = await module_butler(
        {
            "approvals": {},
            "calendar": {"urlEnv": "CAL_URL", "usernameEnv": "CAL_USER", **CALENDAR},
        },
        environ={"CAL_URL": "http://127.0.0.1:9/stale", "CAL_USER": "someone-else"},
        stored={"CAL_URL": radicale.principal_url("stored-owner"), "CAL_USER": "stored-owner"},
    )
    await butler.call("calendar_sync")
    calendars = await butler.call("calendar_list_calendars")
    assert [c["name"] for c in calendars] == ["home"]


def _google_caldav(radicale: RadicaleServer, oauth: GoogleStandIn, user: str) -> Starlette:
    """Radicale behind a gate that admits only a live access token of the stand-in."""
    upstream = httpx.AsyncClient(base_url=radicale.url, auth=httpx.BasicAuth(user, "x"))
    seen: list[str] = []

    async def gate(request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        seen.append(token)
        if scheme != "Bearer" or not oauth.is_live(token):
            return Response("invalid credentials", status_code=401)
        headers = {k: v for k, v in request.headers.items() if k in FORWARDED}
        answer = await upstream.request(
            request.method, request.url.path, content=await request.body(), headers=headers
        )
        keep = {k: v for k, v in answer.headers.items() if k in ("content-type", "etag")}
        return Response(answer.content, status_code=answer.status_code, headers=keep)

    methods = ["GET", "PUT", "DELETE", "PROPFIND", "REPORT", "OPTIONS"]
    app = Starlette(routes=[Route("/{path:path}", gate, methods=methods)])
    app.state.seen = seen
    return app


async def test_google_auth_sends_the_stored_grants_access_token(
    module_butler: ButlerFactory, radicale: RadicaleServer
) -> None:
    user = "google-owner"
    await asyncio.to_thread(radicale.make_calendar, user, "home")
    async with google_stand_in() as oauth:
        redirect = "http://127.0.0.1:9/api/oauth/google/callback"
        client = oauth.register(redirect)
        urls = endpoints(oauth)
        url = google.authorization_url(
            urls["auth_url"], client.client_id, redirect, "st", google.CALENDAR_SCOPES
        )
        async with httpx.AsyncClient() as http:
            consent = await http.get(url)
        code = httpx.URL(consent.headers["location"]).params["code"]
        grant = await google.exchange_code(
            urls["token_url"], client.client_id, client.client_secret, code, redirect
        )
        app = _google_caldav(radicale, oauth, user)
        async with served_asgi(app) as caldav:
            butler = await module_butler(
                {
                    "approvals": {},
                    "calendar": {"url": f"{caldav}/{user}/", "auth": "google", **CALENDAR},
                },
                environ={"BUTLERS_GOOGLE_TOKEN_URL": urls["token_url"]},
                stored={
                    google.CLIENT_ID: client.client_id,
                    google.CLIENT_SECRET: client.client_secret,
                    google.REFRESH_TOKEN: str(grant.refresh_token),
                },
            )
            await butler.call("calendar_sync", {"rediscover": True})
            calendars = await butler.call("calendar_list_calendars")
            assert [c["name"] for c in calendars] == ["home"]
            made = await butler.call(
                "calendar_create_event",
                {"summary": "Dentist", "start": "2026-06-10T10:00", "end": "2026-06-10T11:00"},
            )
            assert made["summary"] == "Dentist"
            assert app.state.seen and all(oauth.is_live(t) for t in app.state.seen)
            ungranted = await module_butler(
                {"approvals": {}, "calendar": {"url": f"{caldav}/{user}/", "auth": "google"}},
                environ={"BUTLERS_GOOGLE_TOKEN_URL": urls["token_url"]},
            )
            with pytest.raises(ToolError, match="connect Google"):
                await ungranted.call("calendar_sync")


async def test_a_changed_password_reaches_the_running_calendar_without_a_restart(
    module_butler: ButlerFactory, tmp_path: Path
) -> None:
    with start_radicale(tmp_path, users={"ann": "first"}) as server:
        await asyncio.to_thread(server.make_calendar, "ann", "home", "first")
        butler = await module_butler(
            {
                "approvals": {},
                "calendar": {
                    "url": server.principal_url("ann"),
                    "usernameEnv": "CAL_USER",
                    "passwordEnv": "CAL_PASSWORD",
                    **CALENDAR,
                },
            },
            environ={"CAL_USER": "ann", "CAL_PASSWORD": "from-the-environment"},
            stored={"CAL_PASSWORD": "first"},
            shared={},
            watch_secrets=0.1,
        )
        [(module, _)] = [m for m in butler.built.modules.started if m[0].name == "calendar"]
        assert (await butler.call("calendar_sync"))[0]["mode"] != "failed"

        # The password is changed on the server: the butler's login fails...
        await asyncio.to_thread(server.set_password, "ann", "second")
        with pytest.raises(ToolError, match="401"):
            await butler.call("calendar_sync", {"rediscover": True})
        # ...until the owner stores the new one through the butler's tool.
        await butler.call("secret_put", {"key": "CAL_PASSWORD", "value": "second"})
        await butler.call("calendar_sync", {"rediscover": True})
        assert [c["name"] for c in await butler.call("calendar_list_calendars")] == ["home"]

        # Another process (the dashboard) writes the shared store; the own store's value
        # is deleted: the shared one applies, found by the watch on the stores.
        await asyncio.to_thread(server.set_password, "ann", "third")
        shared = SecretStore(butler.built.context.pool, SHARED_TABLE)
        keyring = butler.built.context.secrets.keys.require()  # type: ignore[union-attr]
        await shared.put("CAL_PASSWORD", keyring=keyring, value="third")
        await SecretStore(butler.built.context.pool).delete("CAL_PASSWORD")
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            outcome = await butler.call_raw("calendar_sync", {"rediscover": True})
            if not outcome.is_error:
                break
            assert asyncio.get_running_loop().time() < deadline, outcome.content[0].text
            await asyncio.sleep(0.1)
        assert [m for m in butler.built.modules.started if m[0] is module], "never restarted"
