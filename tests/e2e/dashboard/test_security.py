"""No secret in any response; token mode (401/403), CSRF, Host and CORS checks."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import httpx2 as httpx

from butlers.dashboard.app import api_routes

from ..harness.ecosystem import EcosystemHandle
from ..harness.runtime import CANARY_VALUE, E2E_API_KEY
from .conftest import CSRF, extra_dashboard, seed_sessions

TOKEN = "dashboard-token-" + "x" * 24
SECRETS = (CANARY_VALUE, E2E_API_KEY)


async def test_no_response_contains_a_secret_of_the_environment(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    # Secrets where a careless butler or a user could have put them: a state value,
    # a session's prompt and error. The dashboard must mask them on the way out.
    await butler_ecosystem.call(
        "general", "state_set", {"key": "leak/canary", "value": {"copied": CANARY_VALUE}}
    )
    [session_id] = await seed_sessions(
        butler_ecosystem,
        "general",
        [
            {
                "created_at": datetime.now(UTC),
                "prompt": f"key is {E2E_API_KEY}",
                "error": f"failed with {E2E_API_KEY}",
                "status": "error",
            }
        ],
    )
    paths = {
        re.sub(
            r"\{(\w+)(:path)?\}",
            lambda m: {
                "name": "general",
                "key": "leak%2Fcanary",
                "session_id": session_id,
                "table": "state",
            }.get(m.group(1), "x"),
            route.path,
        )
        for route in api_routes()
        if "GET" in route.methods and route.path != "/api/events"
    }
    paths |= {
        "/api/search?q=canary",
        "/api/search?q=key%20is",
        "/api/butlers/general/tables/sessions",
    }
    checked = 0
    for path in sorted(paths):
        response = await dashboard.get(path)
        for secret in SECRETS:
            assert secret not in response.text, f"{path} leaks a secret"
        checked += response.status_code == 200
    assert checked >= 35  # most GET routes answered with data, not an error
    state = (await dashboard.get("/api/butlers/general/state/leak%2Fcanary")).json()["data"]
    assert state["value"] == {"copied": "[REDACTED]"}
    detail = (await dashboard.get(f"/api/butlers/general/sessions/{session_id}")).json()["data"]
    assert detail["prompt"] == "key is [REDACTED]"


async def test_token_mode_needs_a_bearer_or_a_session_cookie(
    butler_ecosystem: EcosystemHandle,
) -> None:
    async with extra_dashboard(butler_ecosystem, token=TOKEN) as (url, _app):
        async with httpx.AsyncClient(base_url=url) as anonymous:
            refused = await anonymous.get("/api/butlers")
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "UNAUTHORIZED"
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert (await anonymous.get("/api/events")).status_code == 401
            wrong = await anonymous.get("/api/butlers", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert (await anonymous.get("/api/health")).status_code == 200
            status = (await anonymous.get("/api/auth/status")).json()["data"]
            assert status == {"token_required": True, "authenticated": False, "actor": None}
            bad_login = await anonymous.post("/login", data={"token": "guess", "next": "/"})
            assert bad_login.status_code == 401

        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=url, headers=bearer) as client:
            assert (await client.get("/api/butlers")).status_code == 200
            # A bearer token is not ambient: no CSRF header needed.
            written = await client.put("/api/butlers/general/state/token-mode", json={"value": 1})
            assert written.status_code == 200

        async with httpx.AsyncClient(base_url=url) as browser:
            login = await browser.post("/login", data={"token": TOKEN, "next": "/sessions"})
            assert (login.status_code, login.headers["location"]) == (303, "/sessions")
            cookie = login.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
            assert TOKEN not in cookie
            assert (await browser.get("/api/butlers")).status_code == 200
            no_csrf = await browser.put("/api/butlers/general/state/x", json={"value": 1})
            assert (no_csrf.status_code, no_csrf.json()["error"]["code"]) == (403, "FORBIDDEN")
            foreign = await browser.put(
                "/api/butlers/general/state/x",
                json={"value": 1},
                headers={**CSRF, "Origin": "https://evil.example"},
            )
            assert foreign.status_code == 403
            allowed = await browser.put(
                "/api/butlers/general/state/x", json={"value": 1}, headers=CSRF
            )
            assert allowed.status_code == 200
            who = (await browser.get("/api/auth/status")).json()["data"]["actor"]
            assert re.fullmatch(r".+ \(session [0-9a-f]{8}\)", who), who
            session_cookie = dict(browser.cookies)
            await browser.post("/logout")
            assert (await browser.get("/api/butlers")).status_code == 401
        # The cookie copied before the logout is dead on the server, not only forgotten
        # by the browser.
        async with httpx.AsyncClient(base_url=url, cookies=session_cookie) as replay:
            assert (await replay.get("/api/butlers")).status_code == 401


async def test_without_a_login_only_loopback_host_names_are_answered(
    butler_ecosystem: EcosystemHandle,
) -> None:
    async with (
        extra_dashboard(butler_ecosystem, login=False) as (url, _app),
        httpx.AsyncClient(base_url=url, headers=CSRF) as dashboard,
    ):
        rebinding = await dashboard.get(
            "/api/butlers", headers={"Host": f"{uuid.uuid4().hex}.example"}
        )
        assert rebinding.status_code == 400
        local = await dashboard.get("/api/butlers", headers={"Host": "localhost"})
        assert local.status_code == 200
        forged = await dashboard.post(
            "/api/butlers/general/tick",
            headers={"X-Butlers-CSRF": "", "Content-Type": "text/plain"},
        )
        assert (forged.status_code, forged.json()["error"]["code"]) == (403, "FORBIDDEN")
        status = (await dashboard.get("/api/auth/status")).json()["data"]
        assert status == {
            "token_required": False,
            "authenticated": True,
            "actor": "local (no login)",
        }


def _preflight(origin: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "x-butlers-csrf,content-type",
    }


async def test_cors_allows_no_other_origin_by_default(dashboard: httpx.AsyncClient) -> None:
    for origin in ("http://localhost:40173", "https://evil.example"):
        answer = await dashboard.options("/api/butlers/general/state/k", headers=_preflight(origin))
        assert "access-control-allow-origin" not in answer.headers, origin


async def test_cors_allows_the_dev_server_origin_when_dev_py_runs_it(
    butler_ecosystem: EcosystemHandle,
) -> None:
    dev = "http://localhost:40173"  # `dev.py ui-dev` starts its dashboard with this origin
    async with (
        extra_dashboard(butler_ecosystem, cors_origins=(dev,)) as (url, _app),
        httpx.AsyncClient(base_url=url) as client,
    ):
        ok = await client.options("/api/butlers/general/state/k", headers=_preflight(dev))
        assert ok.headers.get("access-control-allow-origin") == dev
        assert ok.headers.get("access-control-allow-credentials") == "true"
        evil = await client.options(
            "/api/butlers/general/state/k", headers=_preflight("https://evil.example")
        )
        assert "access-control-allow-origin" not in evil.headers
