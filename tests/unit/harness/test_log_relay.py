"""Butler log lines reach pytest's console at the level asked with --log-cli-level."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.e2e.harness.log_relay import parse_line

ROOT = Path(__file__).resolve().parents[3]
LINES = [
    "2026-01-02 03:04:05,678 DEBUG [health] butlers.core.spawner: quiet detail",
    "2026-01-02 03:04:05,679 INFO [health] butlers.tool_span: call_tool measurement_log ok",
    "2026-01-02 03:04:05,680 WARNING [switchboard] butlers.x: route to health failed",
    "Traceback (most recent call last):",
]


def test_a_line_keeps_its_butler_and_level() -> None:
    assert parse_line(LINES[1], "x") == (
        "health",
        logging.INFO,
        "butlers.tool_span: call_tool measurement_log ok",
    )
    assert parse_line(LINES[2], "x")[:2] == ("switchboard", logging.WARNING)
    assert parse_line(LINES[3], "general") == ("general", logging.INFO, LINES[3])


def _run_pytest(tmp_path: Path, level: str) -> str:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    (logs / "health.log").write_text("\n".join(LINES) + "\n")
    test = tmp_path / "test_relayed.py"
    test.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from tests.e2e.harness.log_relay import LogRelay

            def test_relay():
                LogRelay(Path({str(logs)!r})).relay_new_lines()
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(test), f"--log-cli-level={level}", "-p",
         "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_relayed_lines_show_on_the_console_at_the_chosen_level(tmp_path: Path) -> None:
    info = _run_pytest(tmp_path, "INFO")
    assert "call_tool measurement_log ok" in info and "route to health failed" in info
    assert "butlers.e2e.health" in info and "butlers.e2e.switchboard" in info
    assert "quiet detail" not in info
    assert "quiet detail" in _run_pytest(tmp_path, "DEBUG")
