"""When reminders fall due: delays, RRULEs in the owner's time zone, their bounds."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from butlers.modules.reminders.timing import (
    TimingError,
    check_at,
    check_rule,
    next_occurrence,
    parse_after,
)

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("2h30m", 9000), ("1d", 86400), ("PT2H", 7200), ("1w", 604800)],
)
def test_delays_are_read_in_short_and_iso_forms(text: str, seconds: int) -> None:
    assert parse_after(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["soon", "0s", "-5m", "5 parsecs", "", "99999d"])
def test_bad_delays_say_how_to_write_one(text: str) -> None:
    with pytest.raises(TimingError, match="after="):
        parse_after(text)


def test_a_time_needs_an_offset_and_a_future() -> None:
    with pytest.raises(TimingError, match="time zone offset"):
        check_at(datetime(2030, 1, 1, 9), NOW)
    with pytest.raises(TimingError, match="in the past"):
        check_at(NOW - timedelta(hours=1), NOW)


def test_a_daily_rule_keeps_its_wall_clock_time_across_daylight_saving() -> None:
    start = datetime(2026, 3, 28, 9, 0, tzinfo=PARIS)  # the day before clocks go forward
    rule = "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
    first = check_rule(rule, start, PARIS, timedelta(minutes=15))
    second = next_occurrence(rule, first, "Europe/Paris", first)
    assert first == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET
    assert second == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST


def test_a_rule_that_ended_has_no_next_occurrence() -> None:
    start = datetime(2026, 3, 28, 9, 0, tzinfo=UTC)
    first = check_rule("FREQ=DAILY;COUNT=1", start, PARIS, timedelta(minutes=15))
    assert next_occurrence("FREQ=DAILY;COUNT=1", first, "UTC", first) is None


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("FREQ=MINUTELY", "more often"),
        ("FREQ=DAILY;BYHOUR=9,10;BYMINUTE=0,5", "more often"),
        ("FREQ=SOMETIMES", "not a valid"),
        ("DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY", "one RFC 5545 RRULE"),
        ("FREQ=DAILY;UNTIL=20200101T000000Z", "no occurrence"),
    ],
)
def test_rules_that_would_flood_the_owner_or_never_fire_are_refused(
    rule: str, problem: str
) -> None:
    with pytest.raises(TimingError, match=problem):
        check_rule(rule, NOW, PARIS, timedelta(minutes=15))
