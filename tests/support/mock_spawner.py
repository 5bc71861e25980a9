"""A stand-in spawner for tests of code that triggers sessions (e.g. the scheduler)."""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any

from butlers.core.spawner import SpawnerResult


class MockSpawner:
    """Records every trigger and answers with queued results (or a default success)."""

    def __init__(self) -> None:
        self.invocations: list[dict[str, Any]] = []
        self._results: deque[SpawnerResult | Exception] = deque()

    def queue(self, result: SpawnerResult | Exception) -> None:
        self._results.append(result)

    async def trigger(
        self,
        prompt: str,
        *,
        trigger_source: str = "trigger",
        context: Any = None,
        timeout_seconds: float | None = None,
    ) -> SpawnerResult:
        self.invocations.append(
            {"prompt": prompt, "trigger_source": trigger_source, "context": context}
        )
        if self._results:
            queued = self._results.popleft()
            if isinstance(queued, Exception):
                raise queued
            return queued
        return SpawnerResult(
            session_id=str(uuid.uuid4()),
            success=True,
            output="ok",
            error=None,
            duration_ms=0,
            trigger_source=trigger_source,
        )
