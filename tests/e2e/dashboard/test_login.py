"""The dashboard needs a login by default, on loopback too: what another local account
tries gets 401; a one-time login link signs in once; failed attempts back off; the
audit names who acted; responses show paths relative to the data directory."""

from __future__ import annotations

import asyncio
import re
import uuid

import httpx2 as httpx
import pytest

from butlers.dashboard.app import api_routes
from butlers.dashboard.auth import OPEN_PATHS
from butlers.dashboard.logins import login_code, login_url
from butlers.dashboard.routers.oauth import CALLBACK_PATH

from ..harness.ecosystem import EcosystemHandle
from .conftest import CSRF, extra_dashboard

TOKEN = "dashboard-token-" + "y" * 24


def _own_dashboard(handle: EcosystemHandle) -> str:
    if handle.dashboard_url is None:
        pytest.skip(f"the {handle.backend} backend runs no dashboard")
    return handle.dashboard_url


async def test_a_local_client_without_a_login_is_refused_what_the_attack_did(
    butler_ecosystem: EcosystemHandle,
) -> None:
    """What another local account did to the dashboard `butlers up` started: read
    sessions, call any tool, start a paid trigger, create a schedule, decide approvals."""
    url = _own_dashboard(butler_ecosystem)
    async with httpx.AsyncClient(base_url=url, headers=CSRF, timeout=30) as other_user:
        status = (await other_user.get("/api/auth/status")).json()["data"]
        assert status == {"token_required": True, "authenticated": False, "actor": None}
        attempts = [
            other_user.get("/api/sessions"),
            other_user.get("/api/butlers/general/sessions"),
            other_user.get("/api/butlers/general/logs"),
            other_user.get("/api/butlers/general/state"),
            other_user.get("/api/events"),
            other_user.post(
                "/api/butlers/general/mcp/call",
                json={"tool_name": "state_set", "arguments": {"key": "pwned", "value": 1}},
            ),
            other_user.post("/api/butlers/general/trigger", json={"prompt": "spend money"}),
            other_user.post(
                "/api/butlers/general/schedules",
                json={"name": "pwned", "cron": "* * * * *", "prompt": "x"},
            ),
            other_user.post(f"/api/approvals/actions/{uuid.uuid4()}/approve", json={}),
            other_user.post(f"/api/approvals/actions/{uuid.uuid4()}/reject", json={}),
        ]
        for answer in await asyncio.gather(*attempts):
            assert answer.status_code == 401, (answer.request.url, answer.text[:200])
            assert answer.json()["error"]["code"] == "UNAUTHORIZED"
        every_route = [
            route.path
            for route in api_routes()
            if "GET" in route.methods and route.path not in OPEN_PATHS
        ]
        for path in every_route:
            concrete = re.sub(r"\{[^}]+\}", "general", path)
            answer = await other_user.get(concrete)
            assert answer.status_code == 401, concrete
        # The OAuth callback's credential is a state a signed-in user started: none, no entry.
        forged = await other_user.get(f"{CALLBACK_PATH}?state=forged&code=stolen")
        assert forged.status_code == 400 and "start again" in forged.text
    assert await butler_ecosystem.call("general", "state_get", {"key": "pwned"}) is None


async def test_a_one_time_login_link_signs_in_once_and_the_audit_names_who_acted(
    butler_ecosystem: EcosystemHandle,
) -> None:
    url = _own_dashboard(butler_ecosystem)
    secret = butler_ecosystem.dashboard_token
    assert secret, "the dashboard needs a login on every backend"
    link = login_url(url, secret)
    async with httpx.AsyncClient(base_url=url, timeout=30) as browser:
        signed_in = await browser.get(link.removeprefix(url.rstrip("/")))
        assert (signed_in.status_code, signed_in.headers["location"]) == (303, "/")
        cookie = signed_in.headers["set-cookie"]
        assert "HttpOnly" in cookie and secret not in cookie
        who = (await browser.get("/api/auth/status")).json()["data"]["actor"]
        assert re.fullmatch(r".+ \(session [0-9a-f]{8}\)", who), who
        key = f"login/{uuid.uuid4().hex[:8]}"
        written = await browser.put(
            f"/api/butlers/general/state/{key}", json={"value": 1}, headers=CSRF
        )
        assert written.status_code == 200, written.text
        audit = (await browser.get("/api/audit-log", params={"butler": "general"})).json()
        entry = next(e for e in audit["data"] if e["target"] == key)
        assert entry["actor"] == who, "the audit names the signed-in identity and session"
        assert entry["actor"] not in ("local", "anonymous", "127.0.0.1")
    async with httpx.AsyncClient(base_url=url, timeout=30) as replay:
        again = await replay.get(link.removeprefix(url.rstrip("/")))
        assert again.status_code == 401 and "already used" in again.text
        assert "set-cookie" not in again.headers
        forged = login_code("not-the-secret-" + "z" * 20)
        refused = await replay.get("/login", params={"code": forged})
        assert refused.status_code == 401 and "not valid" in refused.text


async def test_failed_attempts_back_off_per_client_even_for_the_right_token(
    butler_ecosystem: EcosystemHandle,
) -> None:
    async with extra_dashboard(butler_ecosystem, token=TOKEN) as (url, app):
        app.state.logins.throttle.max_delay = 2.0  # the test waits the longest delay out
        async with httpx.AsyncClient(base_url=url) as guesser:
            for attempt in range(3):  # a few typos are free
                wrong = await guesser.post("/login", data={"token": f"guess-{attempt}"})
                assert wrong.status_code == 401
            wrong = await guesser.get("/api/butlers", headers={"Authorization": "Bearer guess"})
            assert wrong.status_code == 401
            # Held back now: not even the right token is looked at.
            held = await guesser.post("/login", data={"token": TOKEN})
            assert held.status_code == 429 and int(held.headers["retry-after"]) >= 1
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            held = await guesser.get("/api/butlers", headers=bearer)
            assert (held.status_code, held.json()["error"]["code"]) == (429, "RATE_LIMITED")
            await asyncio.sleep(int(held.headers["retry-after"]))
            assert (await guesser.get("/api/butlers", headers=bearer)).status_code == 200


async def test_responses_show_paths_relative_to_the_data_directory(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    health = (await dashboard.get("/api/health")).json()["data"]
    if butler_ecosystem.log_dir is None or not health["directory"].startswith("local"):
        pytest.skip(f"the {butler_ecosystem.backend} backend's dashboard reads no data directory")
    data_dir = str(butler_ecosystem.log_dir.parent)
    assert data_dir not in health["directory"]
    logs = (await dashboard.get("/api/butlers/general/logs")).json()["data"]
    assert logs["source"] == "logs/general.log"
    detail = (await dashboard.get("/api/butlers/general")).json()["data"]
    assert detail["source"] == "specs/general.yaml"
    checked = 0
    for route in api_routes():
        if "GET" not in route.methods or route.path == "/api/events":
            continue
        path = re.sub(r"\{[^}]+\}", "general", route.path)
        answer = await dashboard.get(path)
        assert data_dir not in answer.text, f"{path} shows the data directory's path"
        checked += answer.status_code == 200
    assert checked >= 30
