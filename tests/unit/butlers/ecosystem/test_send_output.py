"""What `butlers send` prints of a runaway answer: a bounded excerpt, unless --full."""

from __future__ import annotations

from butlers.ecosystem.send import SHOWN, short


def test_a_long_answer_is_cut_and_says_how_much_is_left() -> None:
    answer = "x" * 12_000
    shown = short(answer)
    assert len(shown) < SHOWN + 80
    assert shown.startswith("x" * SHOWN) and "11600 more characters; --full" in shown


def test_short_answers_and_full_are_printed_whole() -> None:
    assert short("Logged 80 kg.") == "Logged 80 kg."
    assert short("y" * 5000, full=True) == "y" * 5000
