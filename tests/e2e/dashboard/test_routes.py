"""Every route of the route table answers its envelope over a real ecosystem."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx2 as httpx
import pytest
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from butlers.dashboard.app import api_routes
from butlers.dashboard.envelopes import ErrorResponse
from butlers.dashboard.support import SUPPORT_KEY

# Path parameters: real where the route needs something to exist, unknown otherwise.
VALUES = {
    "name": "relationship",
    "module": "contacts",
    "key": "route-walk",
    "session_id": str(uuid.uuid4()),
    "schedule_id": "no-such-schedule",
    "action_id": str(uuid.uuid4()),
    "rule_id": "relationship:contact_delete",
    "trace_id": "0" * 32,
    "table": "state",
    "fact_id": "1",
    "butler": "relationship",
    "contact_id": str(uuid.uuid4()),
    "thread_id": "<route-walk@mail.example>",
    "request_id": str(uuid.uuid4()),
    "reminder_id": str(uuid.uuid4()),
}
ERROR_CODES = {
    "VALIDATION_ERROR",
    "NOT_FOUND",
    "BUTLER_NOT_FOUND",
    "TOOL_ERROR",
    "NOT_SUPPORTED",
}
ROUTES = [
    (method, route)
    for route in api_routes()
    if route.path != "/api/events"
    for method in sorted(route.methods)
]


def _url(route: APIRoute) -> str:
    return re.sub(r"\{(\w+)(:path)?\}", lambda m: VALUES[m.group(1)], route.path)


@pytest.mark.parametrize(("method", "route"), ROUTES, ids=[f"{m} {r.path}" for m, r in ROUTES])
async def test_route_answers_its_envelope(
    dashboard: httpx.AsyncClient, method: str, route: APIRoute
) -> None:
    body: Any = {} if method in ("POST", "PUT", "PATCH") else None
    if route.path.endswith("/tick") or route.path.endswith("/expire-stale"):
        body = None  # real, harmless writes: they run with no arguments
    response = await dashboard.request(method, _url(route), json=body)
    assert response.status_code < 300 or response.status_code >= 400, "never a redirect"
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    support = (route.openapi_extra or {}).get(SUPPORT_KEY, {})
    if response.status_code >= 400:
        error = ErrorResponse.model_validate(payload).error
        assert error.code in ERROR_CODES, payload
        assert response.status_code != 500
        if support.get("status") == "501":
            assert (response.status_code, error.code) == (501, "NOT_SUPPORTED")
        return
    assert support.get("status") != "501", f"{route.path} should answer 501"
    TypeAdapter(route.response_model).validate_python(payload)
    assert set(payload) == {"data", "meta"}
    if support.get("status") == "empty":
        assert payload["meta"]["supported"] is False and payload["meta"]["reason"]


async def test_a_trailing_slash_is_served_not_redirected(dashboard: httpx.AsyncClient) -> None:
    plain = await dashboard.get("/api/butlers")
    slashed = await dashboard.get("/api/butlers/")
    assert slashed.status_code == 200
    assert [b["name"] for b in slashed.json()["data"]] == [b["name"] for b in plain.json()["data"]]


async def test_an_unknown_api_path_is_a_not_found_envelope(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"


async def test_every_response_carries_the_content_security_policy(
    dashboard: httpx.AsyncClient,
) -> None:
    for path in ("/api/health", "/", "/api/no-such-thing"):
        response = await dashboard.get(path)
        assert "default-src 'self'" in response.headers["content-security-policy"], path
        assert response.headers["x-content-type-options"] == "nosniff"
