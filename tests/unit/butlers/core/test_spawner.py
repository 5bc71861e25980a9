"""Session failures: expected ones are a line in the log, a bug keeps its traceback."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from butlers.core.spawner import Spawner
from butlers.llm.types import ModelError, SessionRequest, SessionTrace


class MemorySessions:
    """The two writes of a session, kept in memory."""

    def __init__(self) -> None:
        self.rows: dict[uuid.UUID, dict[str, Any]] = {}

    async def create(self, session_id: uuid.UUID, **row: Any) -> bool:
        self.rows[session_id] = {"status": "running", **row}
        return True

    async def complete(self, session_id: uuid.UUID, **row: Any) -> None:
        self.rows[session_id].update(row)


class FailingRuntime:
    model_name = "fake"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str:
        raise self.error

    async def aclose(self) -> None:
        return None


async def _fail_with(error: Exception, caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    store = MemorySessions()
    spawner = Spawner(
        butler="health",
        store=store,  # type: ignore[arg-type]
        runtime=FailingRuntime(error),
        not_configured="-",
    )
    with caplog.at_level(logging.INFO, logger="butlers.core.spawner"):
        result = await spawner.trigger("hi")
    assert result.success is False
    [row] = store.rows.values()
    return row


async def test_an_unexpected_runtime_exception_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    row = await _fail_with(KeyError("choices"), caplog)
    assert row["status"] == "error" and row["error"] == "KeyError: 'choices'"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and errors[0].exc_info is not None and errors[0].exc_info[0] is KeyError


async def test_a_model_error_is_a_warning_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    row = await _fail_with(ModelError("http://model answered 503"), caplog)
    assert row["status"] == "error" and "503" in row["error"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and warnings[0].exc_info is None
