"""Each error code, provoked for real: the envelope, the status, the butler it names."""

from __future__ import annotations

import logging
import time
import uuid

import httpx2 as httpx
import pytest

from ..harness.ecosystem import EcosystemHandle
from .conftest import extra_dashboard


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    assert set(error) == {"code", "message", "butler", "details"}
    return error


async def test_unknown_butler_is_butler_not_found(dashboard: httpx.AsyncClient) -> None:
    error = error_of(await dashboard.get("/api/butlers/nobody/state"), 404, "BUTLER_NOT_FOUND")
    assert error["butler"] == "nobody" and "relationship" in str(error["message"])


async def test_unknown_session_is_not_found(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get(f"/api/butlers/health/sessions/{uuid.uuid4()}")
    assert error_of(response, 404, "NOT_FOUND")["butler"] == "health"


async def test_bad_query_values_are_validation_errors(dashboard: httpx.AsyncClient) -> None:
    error = error_of(await dashboard.get("/api/sessions?limit=0"), 400, "VALIDATION_ERROR")
    assert "limit" in str(error["message"]) and error["details"]["errors"]
    error_of(await dashboard.get("/api/sessions?cursor=not-a-cursor"), 400, "VALIDATION_ERROR")
    error_of(await dashboard.get("/api/butlers/health/sessions/12"), 400, "VALIDATION_ERROR")


async def test_a_tool_that_refuses_is_tool_error(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.post(
        "/api/butlers/general/schedules",
        json={"name": "broken-cron", "cron": "every tuesday", "prompt": "hi"},
    )
    error = error_of(response, 422, "TOOL_ERROR")
    assert error["butler"] == "general" and "five-field cron" in str(error["message"])


async def test_what_this_project_lacks_is_not_supported(dashboard: httpx.AsyncClient) -> None:
    # Only the approval-rule writes the seed itself marks as stubs.
    error = error_of(await dashboard.post("/api/approvals/rules", json={}), 501, "NOT_SUPPORTED")
    assert "spec" in str(error["message"])
    # A butler's log is read on every backend: its file, else its pod's (through pods/log).
    logs = await dashboard.get("/api/butlers/general/logs")
    assert logs.status_code != 501, logs.text


async def test_a_write_to_a_killed_butler_is_butler_unreachable_and_it_shows_down(
    butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    await butler_ecosystem.kill("general")
    try:
        response = await dashboard.put("/api/butlers/general/state/k", json={"value": 1})
        error = error_of(response, 502, "BUTLER_UNREACHABLE")
        assert error["butler"] == "general"
        toggle = "/api/butlers/general/module-states/memory/enabled"
        response = await dashboard.put(toggle, json={"enabled": False})
        assert error_of(response, 502, "BUTLER_UNREACHABLE")["butler"] == "general"
        deadline = time.monotonic() + 10
        while True:
            butlers = {b["name"]: b for b in (await dashboard.get("/api/butlers")).json()["data"]}
            if butlers["general"]["status"] == "down":
                break
            assert time.monotonic() < deadline, butlers["general"]
        assert butlers["general"]["reason"]
        audit = (await dashboard.get("/api/audit-log?butler=general&status=error")).json()
        assert any(e["operation"] == "state.set" for e in audit["data"])
    finally:
        await butler_ecosystem.restart("general")
    # The restarted butler forgot the dashboard's MCP session: it is opened again.
    again = await dashboard.put("/api/butlers/general/state/k", json={"value": 2})
    assert again.status_code == 200, again.text


async def test_an_unexpected_exception_is_internal_error_and_logged(
    butler_ecosystem: EcosystemHandle, caplog: pytest.LogCaptureFixture
) -> None:
    async with extra_dashboard(butler_ecosystem) as (url, app):

        async def broken(*_args: object, **_kwargs: object) -> None:
            raise RuntimeError("injected failure with private detail")

        app.state.dashboard.db.fan_out = broken
        with caplog.at_level(logging.ERROR, logger="butlers.dashboard.errors"):
            bearer = {"Authorization": f"Bearer {butler_ecosystem.token}"}
            async with httpx.AsyncClient(base_url=url, headers=bearer) as client:
                response = await client.get("/api/sessions")
        error = error_of(response, 500, "INTERNAL_ERROR")
        assert error["message"] == "Internal server error"
        assert "private detail" not in response.text
        [record] = [r for r in caplog.records if "unhandled error" in r.getMessage()]
        assert record.exc_info and "injected failure" in str(record.exc_info[1])
