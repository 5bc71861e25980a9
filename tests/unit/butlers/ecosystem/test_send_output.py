"""What `butlers send` prints of a runaway answer: a bounded excerpt, unless --full."""

from __future__ import annotations

import pytest

from butlers.ecosystem.send import SHOWN, print_answer, short


def test_a_long_answer_is_cut_and_says_how_much_is_left() -> None:
    answer = "x" * 12_000
    shown = short(answer)
    assert len(shown) < SHOWN + 80
    assert shown.startswith("x" * SHOWN) and "11600 more characters; --full" in shown


def test_short_answers_and_full_are_printed_whole() -> None:
    assert short("Logged 80 kg.") == "Logged 80 kg."
    assert short("y" * 5000, full=True) == "y" * 5000


def test_a_runaway_route_prints_a_few_short_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """A session cut at its length limit after 12 KB of answer: every text `send`
    prints of it is cut (the prompt, the answer, the error, the fallback's reason)."""
    route = {
        "butler": "general",
        "status": "error",
        "session_id": "s1",
        "duration_ms": 172_000,
        "prompt": "p" * 3000,
        "tool_calls": [],
        "output": "tea " * 3000,
        "error": "the model's reply was cut off at its output limit " + "e" * 2000,
    }
    answer = {"classification": {"fallback": True, "reason": "r" * 2000}, "routes": [route]}
    assert print_answer(answer) == 1
    printed = capsys.readouterr()
    lines = (printed.out + printed.err).splitlines()
    assert len(lines) == 5 and max(len(line) for line in lines) < SHOWN + 100, lines
    assert "--full" in printed.err and len(printed.out) < 4 * (SHOWN + 100)
