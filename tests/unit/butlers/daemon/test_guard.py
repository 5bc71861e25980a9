"""What the argument guard refuses, and how it names the argument."""

from __future__ import annotations

import pytest

from butlers.daemon.guard import MAX_DEPTH, argument_problem


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"text": "a\x00b"}, "argument text: text must not contain the NUL character"),
        ({"v": float("nan")}, "argument v: nan is not a finite number"),
        ({"v": {"a": [1, float("inf")]}}, "argument v.a[1]: inf is not a finite number"),
        ({"d": {"bad\x00key": 1}}, "argument d: a key contains the NUL character"),
    ],
)
def test_unstorable_arguments_are_named(arguments: dict, problem: str) -> None:
    found = argument_problem(arguments)
    assert found is not None and problem in found


def test_ordinary_arguments_pass() -> None:
    assert (
        argument_problem(
            {
                "key": "k",
                "value": {"a": [1, 2.5, True, None, "ünïcode"]},
                "n": 10**30,
                "m": -(2**80),
            }
        )
        is None
    )


def test_absurd_nesting_is_refused_without_recursion_naming_the_argument() -> None:
    value: object = 1
    for _ in range(MAX_DEPTH + 5):
        value = [value]
    found = argument_problem({"deep": value})
    assert found == f"argument deep: nested more than {MAX_DEPTH} levels deep"
