"""Golden files: expected output as readable, numbered files per scenario.

`check_golden` compares what a run produced (already normalized text) with
`tests/e2e/golden/<scenario-id>/`; with `--update-golden` it rewrites the directory
instead. CI never passes `--update-golden`. Flows that are not declarative scenarios
(`flow_golden`) keep theirs in `golden/flow-<name>/`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .normalize import Normalizer

GOLDEN_ROOT = Path(__file__).resolve().parents[1] / "golden"
MAX_DIFF_LINES = 80


def update_hint(select: str) -> str:
    return f"pytest tests/e2e -k {select} --update-golden"


def check_golden(
    scenario_id: str,
    files: Mapping[str, str],
    *,
    update: bool,
    root: Path = GOLDEN_ROOT,
    select: str | None = None,
) -> list[str]:
    """Problems between `files` (name → text) and the scenario's golden directory.

    `select`: what `-k` selects the test by, when not the scenario id (hints only).
    """
    directory = root / scenario_id
    hint = update_hint(select or scenario_id)
    if update:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*"):
            if stale.name not in files:
                stale.unlink()
        for name, text in files.items():
            (directory / name).write_text(text)
        return []
    if not directory.is_dir():
        return [
            f"no golden files for {scenario_id!r} in {directory}; "
            f"create them with `{hint}` and review the diff"
        ]
    problems = []
    for name, text in files.items():
        path = directory / name
        if not path.exists():
            problems.append(f"golden file {path} is missing; create it with `{hint}`")
            continue
        expected = path.read_text()
        if expected != text:
            diff = list(
                difflib.unified_diff(
                    expected.splitlines(),
                    text.splitlines(),
                    f"golden/{scenario_id}/{name}",
                    "this run",
                    lineterm="",
                )
            )
            if len(diff) > MAX_DIFF_LINES:
                diff = [*diff[:MAX_DIFF_LINES], f"... {len(diff) - MAX_DIFF_LINES} more lines"]
            problems.append(
                f"{path} differs (if the change is intended: `{hint}`):\n" + "\n".join(diff)
            )
    extra = sorted(p.name for p in directory.glob("*") if p.name not in files)
    if extra:
        problems.append(
            f"golden files {extra} in {directory} are no longer produced; remove them with `{hint}`"
        )
    return problems


def flow_golden(
    flow: str,
    test: str,
    values: Mapping[str, Any],
    normalizer: Normalizer,
    *,
    update: bool,
) -> list[str]:
    """Check (or with `update`, write) `golden/flow-<flow>/`: one normalized JSON file
    per entry of `values` (name → data), all through one normalizer, so an id keeps
    its placeholder across files. `test` is the test function's name (for the hint)."""
    files = {name: normalizer.dumps(value) for name, value in values.items()}
    return check_golden(f"flow-{flow}", files, update=update, select=test)
