"""The order e2e tests run in: the smoke tests first (document 000).

Smoke tests (`test_ecosystem_health.py`) check that every butler is up, serves MCP and
has its tables, with no LLM call; when they fail, nothing after them can pass, so they
run before everything else and their failure is the first one reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

SMOKE_MODULE = "test_ecosystem_health.py"


class _Item(Protocol):
    @property
    def path(self) -> Path: ...


Item = TypeVar("Item", bound=_Item)


def smoke_first(items: Sequence[Item]) -> list[Item]:
    """`items` with the smoke module's tests first; each group keeps its order."""
    smoke = [item for item in items if item.path.name == SMOKE_MODULE]
    return smoke + [item for item in items if item.path.name != SMOKE_MODULE]
