"""Golden files: expected output as readable, numbered files per scenario.

`check_golden` compares what a run produced (already normalized text) with
`tests/e2e/golden/<scenario-id>/`; with `--update-golden` it rewrites the directory
instead. CI never passes `--update-golden`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

GOLDEN_ROOT = Path(__file__).resolve().parents[1] / "golden"
MAX_DIFF_LINES = 80


def update_hint(scenario_id: str) -> str:
    return f"pytest tests/e2e -k {scenario_id} --update-golden"


def check_golden(
    scenario_id: str, files: Mapping[str, str], *, update: bool, root: Path = GOLDEN_ROOT
) -> list[str]:
    """Problems between `files` (name → text) and the scenario's golden directory."""
    directory = root / scenario_id
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
            f"create them with `{update_hint(scenario_id)}` and review the diff"
        ]
    problems = []
    for name, text in files.items():
        path = directory / name
        if not path.exists():
            problems.append(
                f"golden file {path} is missing; create it with `{update_hint(scenario_id)}`"
            )
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
                f"{path} differs (if the change is intended: `{update_hint(scenario_id)}`):\n"
                + "\n".join(diff)
            )
    extra = sorted(p.name for p in directory.glob("*") if p.name not in files)
    if extra:
        problems.append(
            f"golden files {extra} in {directory} are no longer produced; "
            f"remove them with `{update_hint(scenario_id)}`"
        )
    return problems
