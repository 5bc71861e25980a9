"""Next due times and per-butler staggering of identical crons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from butlers.scheduling.cron import MAX_STAGGER, next_due, stagger_offset

BASE = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
NAMES = ["health", "general", "relationship", "messenger", "switchboard"]


@pytest.mark.parametrize(
    ("cron", "interval"),
    [
        ("0 * * * *", timedelta(hours=1)),
        ("*/5 * * * *", timedelta(minutes=5)),
        ("* * * * *", timedelta(minutes=1)),
        ("0 8 * * *", timedelta(days=1)),
    ],
)
def test_stagger_is_bounded_by_15_minutes_and_the_interval(cron: str, interval: timedelta) -> None:
    for name in NAMES:
        offset = stagger_offset(name, cron, BASE)
        assert timedelta(0) <= offset < min(MAX_STAGGER, interval)


def test_stagger_is_deterministic_and_differs_between_butlers() -> None:
    offsets = [stagger_offset(n, "0 * * * *", BASE) for n in NAMES]
    assert offsets == [stagger_offset(n, "0 * * * *", BASE) for n in NAMES]
    assert len(set(offsets)) > 1


def test_next_due_is_after_now_and_keeps_the_cycle() -> None:
    first = next_due("0 * * * *", "health", BASE)
    second = next_due("0 * * * *", "health", first)
    assert first > BASE and second - first == timedelta(hours=1)
    assert first.tzinfo is not None and first.utcoffset() == timedelta(0)
