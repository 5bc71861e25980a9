"""Registration retries: an unreachable switchboard is routine, anything else is a bug."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from butlers.core.context import ButlerContext
from butlers.daemon.registration import Registrar
from butlers.mcp_clients import EndpointUnavailable, ToolFailed, ToolResult
from butlers.waiting import wait_until
from tests.support.butlers import make_resource


class FailingSwitchboard:
    """Answers every call by raising `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.calls = 0

    async def call_tool(self, url: str, name: str, arguments: Any = None, **_: Any) -> Any:
        self.calls += 1
        raise self.error

    async def close(self) -> None:
        return None


async def _attempts(error: BaseException, caplog: pytest.LogCaptureFixture) -> FailingSwitchboard:
    context = ButlerContext(resource=make_resource("health"), schema="health", pool=None)  # type: ignore[arg-type]
    switchboard = FailingSwitchboard(error)
    registrar = Registrar(
        context,
        switchboard_url="http://127.0.0.1:1/mcp",
        advertise_url="http://127.0.0.1:2/mcp",
        interval=60,
        clients=switchboard,  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.INFO, logger="butlers.daemon.registration"):
        registrar.start()
        try:
            await wait_until(lambda: switchboard.calls >= 2, timeout=5)
        finally:
            await registrar.aclose()
    return switchboard


async def test_an_unreachable_switchboard_is_retried_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _attempts(EndpointUnavailable("connection refused"), caplog)
    records = [r for r in caplog.records if r.name == "butlers.daemon.registration"]
    assert records and all(r.levelno == logging.INFO for r in records)
    assert "not reachable yet" in records[0].getMessage()


async def test_a_bug_is_logged_as_an_error_with_its_traceback_and_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    switchboard = await _attempts(TypeError("unexpected keyword 'hints'"), caplog)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors, "a bug must not pass as 'switchboard not reachable yet'"
    assert errors[0].exc_info is not None and errors[0].exc_info[0] is TypeError
    assert not any("not reachable yet" in r.getMessage() for r in caplog.records)
    assert switchboard.calls >= 2  # still retried: the switchboard may be fixed meanwhile


async def test_a_refusal_by_the_switchboard_is_an_error_naming_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = "url: String should match pattern '^https?://'"
    refusal = ToolResult(None, text, True, {})
    await _attempts(ToolFailed(refusal), caplog)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and "refused" in errors[0].getMessage()
    assert "should match pattern" in errors[0].getMessage()
