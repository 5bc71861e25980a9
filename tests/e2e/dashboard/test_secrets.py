"""Secrets through the dashboard: each butler's store (through its tools), the shared
store, rotation of the key, and the Google OAuth bootstrap against a local
authorization server (Authlib)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx2 as httpx
import pytest

from butlers.core.context import ButlerContext
from butlers.core.secrets import SecretResolver
from butlers.ecosystem.rotation import rotate
from butlers.modules.base import ModuleContext
from butlers.oauth import google
from butlers.secretbox import Keyring, KeySource, new_key
from butlers.settings import GoogleEndpoints
from tests.support.butlers import make_resource
from tests.support.oauth_server import endpoints, google_stand_in

from ..harness.ecosystem import EcosystemHandle
from .conftest import CSRF, extra_dashboard


def data(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def name() -> str:
    return f"E2E_{uuid.uuid4().hex[:8].upper()}_TOKEN"


async def test_a_secret_written_through_the_dashboard_is_sealed_listed_without_value_and_audited(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    key, value = name(), f"value-{uuid.uuid4().hex}"
    url = f"/api/butlers/general/secrets/{key}"
    written = data(await dashboard.put(url, json={"value": value, "category": "api"}))
    assert (written["is_set"], written["category"], written["source"]) == (True, "api", "store")
    listed = {e["key"]: e for e in data(await dashboard.get("/api/butlers/general/secrets"))}
    assert listed[key]["is_set"] is True and value not in str(listed)
    raw = await (await butler_ecosystem.pool("general")).fetchval(
        "SELECT value FROM secrets WHERE key = $1", key
    )
    assert value.encode() not in bytes(raw)
    kept = data(await dashboard.put(url, json={"description": "the e2e API"}))
    assert (kept["is_set"], kept["category"], kept["description"]) == (True, "api", "the e2e API")
    audit = (await dashboard.get("/api/audit-log?butler=general&operation=secret.put")).json()
    mine = [e for e in audit["data"] if e["target"] == key]
    assert len(mine) == 2 and all(e["actor"] for e in mine)
    assert value not in str(audit)
    assert data(await dashboard.delete(url))["key"] == key
    assert (await dashboard.delete(url)).status_code == 404
    bad = await dashboard.put("/api/butlers/general/secrets/not%20a%20key", json={"value": "x"})
    assert bad.status_code == 400 and "TELEGRAM_BOT_TOKEN" in bad.text


async def test_shared_secrets_are_listed_apart_and_every_butler_role_may_read_them(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    key = name()
    url = f"/api/butlers/shared/secrets/{key}"
    assert data(await dashboard.put(url, json={"value": "shared-value"}))["source"] == "shared"
    shared = data(await dashboard.get("/api/butlers/shared/secrets"))
    assert key in [e["key"] for e in shared] and "shared-value" not in str(shared)
    table = f'"{butler_ecosystem.dashboard_schema}".shared_secrets'
    for butler in ("health", "general"):
        pool = await butler_ecosystem.pool(butler)
        assert await pool.fetchval(f"SELECT is_sensitive FROM {table} WHERE key = $1", key)
    data(await dashboard.delete(url))


async def test_rotation_reseals_every_store_under_the_new_key(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    path = butler_ecosystem.secrets_key_file
    if path is None or butler_ecosystem.backend != "local":
        pytest.skip(
            "in a cluster the keyring is the butlers-auth Secret and changing it rolls "
            "every pod; rotation is exercised here on the local backend's key file"
        )
    key = name()
    for store in ("general", "shared"):
        data(await dashboard.put(f"/api/butlers/{store}/secrets/{key}", json={"value": "kept"}))
    before = Keyring.parse(path.read_text())
    summary = await asyncio.to_thread(rotate, path.parent.parent)  # `butlers secrets rotate`
    after = Keyring.parse(path.read_text())
    assert len(after.keys) == 1 and after.primary_id != before.primary_id, summary
    assert after.primary_id in summary and "general" in summary and "shared" in summary
    sealed_with = await (await butler_ecosystem.pool("general")).fetch(
        "SELECT DISTINCT key_id FROM secrets WHERE value IS NOT NULL"
    )
    assert [r["key_id"] for r in sealed_with] == [after.primary_id]
    resolver = SecretResolver(
        await butler_ecosystem.pool("general"),
        KeySource(file=path),
        shared_schema=butler_ecosystem.dashboard_schema,
    )
    await resolver.load()
    assert resolver.errors == {}
    assert await resolver.get(key) == "kept"


async def test_google_oauth_bootstrap_stores_a_grant_butlers_refresh(
    butler_ecosystem: EcosystemHandle,
) -> None:
    if butler_ecosystem.secrets_key_file is None or butler_ecosystem.dashboard_dsn is None:
        pytest.skip(f"the {butler_ecosystem.backend} backend gives no key to a test dashboard")
    async with google_stand_in() as server:
        urls = endpoints(server)
        settings = {
            "google": GoogleEndpoints(auth_url=urls["auth_url"], token_url=urls["token_url"]),
            "secrets_key_file": butler_ecosystem.secrets_key_file,
            "login": False,
        }
        async with (
            extra_dashboard(butler_ecosystem, **settings) as (base, _app),
            httpx.AsyncClient(base_url=base, headers=CSRF, timeout=30) as ui,
        ):
            await _oauth_flow(butler_ecosystem, server, ui, base, urls["token_url"])


async def _status(ui: httpx.AsyncClient) -> dict[str, Any]:
    return data(await ui.get("/api/oauth/status"))  # type: ignore[no-any-return]


async def _consent(ui: httpx.AsyncClient) -> httpx.Response:
    start = data(await ui.get("/api/oauth/google/start?redirect=false"))
    async with httpx.AsyncClient() as browser:
        consent = await browser.get(start["url"])
    assert consent.status_code == 302, consent.text
    callback = httpx.URL(consent.headers["location"])
    return await ui.get(callback.path, params=dict(callback.params))


async def _oauth_flow(
    handle: EcosystemHandle, server: Any, ui: httpx.AsyncClient, base: str, token_url: str
) -> None:
    await ui.delete("/api/oauth/google/credentials")
    assert (await _status(ui))["state"] == "not_configured"
    assert (await ui.get("/api/oauth/google/start")).status_code == 400  # no client yet
    client = server.register(f"{base}api/oauth/google/callback")
    creds = {"client_id": client.client_id, "client_secret": client.client_secret}
    stored = data(await ui.put("/api/oauth/google/credentials", json=creds))
    assert (stored["client_id_set"], stored["refresh_token_set"]) == (True, False)
    redirect = await ui.get("/api/oauth/google/start", follow_redirects=False)
    assert redirect.status_code == 302
    query = httpx.URL(redirect.headers["location"]).params
    assert (query["access_type"], query["prompt"]) == ("offline", "consent")
    assert query["scope"] == " ".join(google.CALENDAR_SCOPES) and len(query["state"]) >= 43

    elsewhere = server.register("https://elsewhere.example/callback")
    wrong = {"client_id": elsewhere.client_id, "client_secret": elsewhere.client_secret}
    data(await ui.put("/api/oauth/google/credentials", json=wrong))
    assert (await _consent(ui)).status_code == 400
    mismatch = await _status(ui)
    assert mismatch["state"] == "redirect_uri_mismatch"
    assert mismatch["redirect_uri"] == f"{base}api/oauth/google/callback"
    data(await ui.put("/api/oauth/google/credentials", json=creds))

    server.deny = "access_denied"
    assert (await _consent(ui)).status_code == 400
    assert (await _status(ui))["state"] == "unapproved_tester"
    server.deny = None
    connected = await _consent(ui)
    assert data(connected)["scopes"] == list(google.CALENDAR_SCOPES)
    replay = await ui.get(connected.request.url.path, params=dict(connected.request.url.params))
    assert replay.status_code == 400 and "start again" in replay.text  # consumed once
    status = await _status(ui)
    assert (status["state"], status["connected"]) == ("connected", True)
    assert data(await ui.get("/api/oauth/google/credentials"))["refresh_token_set"] is True

    # A butler reads the grant from the shared store and gets access tokens with it.
    # A module of a butler (as the calendar does) gets access tokens from that grant, read
    # from the shared store with the butler's own role.
    pool = await handle.pool("general")
    butler = ButlerContext(
        resource=make_resource("general"),
        schema=handle["general"].schema,
        pool=pool,
        secrets=SecretResolver(
            pool, KeySource(file=handle.secrets_key_file), shared_schema=handle.dashboard_schema
        ),
        google_token_url=token_url,
    )
    module = ModuleContext(name="calendar", butler=butler, config=None, services=None)  # type: ignore[arg-type]
    access = await module.google_tokens().access_token()
    assert server.is_live(access)

    server.granted_scope = "openid"
    await _consent(ui)
    assert (await _status(ui))["state"] == "missing_scope"
    server.granted_scope = None
    await _consent(ui)
    data(await ui.put("/api/oauth/google/credentials", json={**creds, "client_secret": "wrong"}))
    refused = await _status(ui)
    assert refused["state"] == "unknown_error" and "invalid_client" in refused["detail"]
    data(await ui.put("/api/oauth/google/credentials", json=creds))
    assert (await _status(ui))["state"] == "connected"  # the grant was kept
    server.revoke_all()
    expired = await _status(ui)
    assert expired["state"] == "expired" and "Connect again" in expired["remediation"]
    assert data(await ui.delete("/api/oauth/google/credentials"))["client_id_set"] is False


async def test_rotating_the_clusters_key_keeps_every_value_open_and_the_butlers_working(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    """The cluster procedure of docs/secrets.md: the new key first in `butlers-auth`
    (every pod rolled), the stores re-sealed, the old key dropped (rolled again)."""
    handle = butler_ecosystem
    if handle.set_secrets_keyring is None or handle.secrets_key_file is None:
        pytest.skip(
            f"the {handle.backend} backend's keyring is a file its processes read again: "
            "test_rotation_reseals_every_store_under_the_new_key"
        )
    key = name()
    for store in ("general", "shared"):
        data(await dashboard.put(f"/api/butlers/{store}/secrets/{key}", json={"value": "kept"}))
    # A credential general's calendar module opens at every start (Radicale takes any
    # password): a pod that could not open it would start the module `failed`.
    data(await dashboard.put("/api/butlers/general/secrets/CALDAV_PASSWORD", json={"value": "e2e"}))
    old = Keyring.parse(handle.secrets_key_file.read_text())
    new = Keyring.parse(new_key())

    await handle.set_secrets_keyring(f"{new.text()},{old.text()}")
    rotated = data(await dashboard.post("/api/secrets/rotate"))
    assert rotated["failed"] == {} and rotated["key_id"] == new.primary_id, rotated
    assert rotated["reencrypted"]["general"] >= 2 and rotated["reencrypted"]["shared"] >= 1
    await handle.set_secrets_keyring(new.text())  # the old key gone from every pod

    pool = await handle.pool("general")
    sealed_with = await pool.fetch("SELECT DISTINCT key_id FROM secrets WHERE value IS NOT NULL")
    assert [r["key_id"] for r in sealed_with] == [new.primary_id]
    resolver = SecretResolver(
        pool, KeySource(value=new.text()), shared_schema=handle.dashboard_schema
    )
    await resolver.load()
    assert resolver.errors == {}
    assert (await resolver.get(key), await resolver.get("CALDAV_PASSWORD")) == ("kept", "e2e")
    # The restarted butler opened its credential with the new key alone, and works.
    status = await handle.call("general", "status")
    calendar = next(m for m in status["modules"] if m["name"] == "calendar")
    assert calendar["status"] == "active", calendar
    assert (await handle.call("general", "calendar_sync"))[0]["mode"] != "failed"
    listed = data(await dashboard.get("/api/butlers/general/secrets"))
    assert any(e["key"] == key and e["is_set"] for e in listed)
