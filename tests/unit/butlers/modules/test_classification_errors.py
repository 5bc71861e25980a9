"""Classification: a model that fails falls back quietly; a bug is logged as a bug."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from butlers.core.spawner import SpawnerResult
from butlers.mcp_clients import McpClient
from butlers.modules.switchboard.pipeline import Pipeline
from butlers.modules.switchboard.store import Registration


class Registry:
    async def registry(self, stale_after: float) -> list[Registration]:
        now = datetime.now(UTC)
        return [
            Registration("health", "Health", "http://h/mcp", ["weight"], ["health"], now, now, True)
        ]


class Spawner:
    configured = True

    def __init__(self, outcome: SpawnerResult | Exception) -> None:
        self.outcome = outcome

    async def trigger(self, prompt: str, **_: Any) -> SpawnerResult:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def _pipeline(outcome: SpawnerResult | Exception) -> Pipeline:
    return Pipeline(
        butler="switchboard",
        store=Registry(),  # type: ignore[arg-type]
        triage=None,  # type: ignore[arg-type]
        clients=McpClient(),
        spawner=Spawner(outcome),  # type: ignore[arg-type]
        classification_timeout=5,
        route_timeout=5,
        stale_after=60,
    )


async def test_a_bug_while_classifying_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        result = await _pipeline(TypeError("bad prompt template")).classify("Log 80kg")
    assert result.fallback and [e.butler for e in result.entries] == ["general"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors, "a classification bug must not pass silently as the general fallback"
    assert errors[0].exc_info is not None and errors[0].exc_info[0] is TypeError


async def test_a_failed_model_session_falls_back_without_an_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failed = SpawnerResult(
        session_id="s", success=False, output=None, error="ModelError: 503", duration_ms=1
    )
    with caplog.at_level(logging.INFO):
        result = await _pipeline(failed).classify("Log 80kg")
    assert result.fallback and "503" in (result.reason or "")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_unreachable_database_is_a_warning_and_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        result = await _pipeline(ConnectionRefusedError("db down")).classify("Log 80kg")
    assert result.fallback
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(r.levelno == logging.WARNING for r in caplog.records)


async def test_an_unusable_answer_is_a_counted_warning_with_the_answer_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = "Sure! The weight belongs to health. " + "blah " * 200
    rambling = SpawnerResult(session_id="s", success=True, output=answer, error=None, duration_ms=1)
    pipeline = _pipeline(rambling)
    with caplog.at_level(logging.INFO):
        result = await pipeline.classify("Log 80kg")
    assert result.fallback and [e.butler for e in result.entries] == ["general"]
    assert "no JSON array" in (result.reason or "") and "Sure! The weight" in (result.reason or "")
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "Sure! The weight" in warning.getMessage()
    assert len(warning.getMessage()) < 600, "the answer is cut, not logged whole"
    assert pipeline.stats()["classification_fallbacks"] == 1
    good = SpawnerResult(
        session_id="t",
        success=True,
        output='[{"butler": "health", "prompt": "Log 80 kg", "segment": "80kg"}]',
        error=None,
        duration_ms=1,
    )
    pipeline._spawner = Spawner(good)  # type: ignore[assignment]
    assert not (await pipeline.classify("Log 80kg")).fallback
    assert pipeline.stats()["classification_fallbacks"] == 1
