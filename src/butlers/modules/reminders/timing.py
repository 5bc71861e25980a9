"""When a reminder falls due: durations, RFC 5545 recurrence rules, the owner's time zone.

Pure functions (no database, no MCP). `dateutil` is imported when a rule is first
read, so a butler whose reminders never recur does not load it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from dateutil.rrule import rrule

MAX_AHEAD = timedelta(days=3660)  # a reminder at most ten years ahead
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_SHORT = re.compile(r"(\d+)\s*([wdhms])")
_ISO = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)S)?)?$"
)
RULE_SAMPLE = 50  # occurrences checked for the minimum interval


class TimingError(ValueError):
    """A time, duration or rule a reminder cannot use; the message says what to fix."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimingError(
            f"unknown time zone {name!r} (an IANA name such as Europe/Paris)"
        ) from None


def parse_after(text: str) -> timedelta:
    """A delay such as `90s`, `15m`, `2h30m`, `1d` or ISO 8601 `PT2H`."""
    value = text.strip().lower()
    seconds = 0
    iso = _ISO.match(value.upper())
    if iso and any(iso.groupdict().values()):
        seconds = sum(int(v) * _UNITS[k] for k, v in iso.groupdict().items() if v)
    elif value and _SHORT.sub("", value).strip() == "":
        seconds = sum(int(n) * _UNITS[u] for n, u in _SHORT.findall(value))
    else:
        raise TimingError(
            f"after={text!r} is not a delay: write e.g. '90s', '15m', '2h30m', '1d' or 'PT2H'"
        )
    delay = timedelta(seconds=seconds)
    if delay < timedelta(seconds=1) or delay > MAX_AHEAD:
        raise TimingError(f"after={text!r} must be between 1 second and {MAX_AHEAD.days} days")
    return delay


def check_at(at: datetime, now: datetime) -> datetime:
    """A due time: aware, not in the past, not more than ten years ahead."""
    if at.tzinfo is None:
        raise TimingError("at must carry a time zone offset, e.g. 2030-01-31T09:00:00+01:00")
    if at < now - timedelta(seconds=1):
        raise TimingError(f"at={at.isoformat()} is in the past (now {now.isoformat()})")
    if at > now + MAX_AHEAD:
        raise TimingError(f"at must be within {MAX_AHEAD.days} days")
    return at.astimezone(UTC)


def _rule(text: str, start: datetime, tz: ZoneInfo) -> rrule:
    from dateutil.rrule import rrule, rrulestr

    body = text.strip()
    if body.upper().startswith("RRULE:"):
        body = body[len("RRULE:") :]
    if not body or "\n" in body or "DTSTART" in body.upper():
        raise TimingError("rrule is one RFC 5545 RRULE, e.g. FREQ=WEEKLY;BYDAY=SU;BYHOUR=18")
    try:
        parsed = rrulestr(body, dtstart=start.astimezone(tz).replace(microsecond=0))
    except (ValueError, TypeError) as exc:
        raise TimingError(f"rrule {text!r} is not a valid RFC 5545 rule: {exc}") from None
    if not isinstance(parsed, rrule):
        raise TimingError("rrule is one RFC 5545 RRULE")
    return parsed


def check_rule(text: str, start: datetime, tz: ZoneInfo, min_interval: timedelta) -> datetime:
    """The first occurrence at or after `start`; refuses rules that never fire or fire
    more often than `min_interval` (a reminder is for a person, not a loop)."""
    if start.microsecond:  # rules count whole seconds: the first one not before `start`
        start = start.replace(microsecond=0) + timedelta(seconds=1)
    rule = _rule(text, start, tz)
    first = rule.after(start.astimezone(tz), inc=True)
    if first is None:
        raise TimingError(f"rrule {text!r} has no occurrence after {start.isoformat()}")
    previous = first
    for index, occurrence in enumerate(rule.xafter(first, inc=False)):
        if occurrence - previous < min_interval:
            raise TimingError(
                f"rrule {text!r} fires more often than every "
                f"{int(min_interval.total_seconds())} s (the minimum interval)"
            )
        previous = occurrence
        if index >= RULE_SAMPLE:
            break
    found: datetime = first.astimezone(UTC)
    return found


def next_occurrence(text: str, start: datetime, tz: str, after: datetime) -> datetime | None:
    """The rule's first occurrence strictly after `after` (None: the rule has ended).
    Occurrences are wall-clock times in `tz`, so 09:00 stays 09:00 across DST."""
    zone_info = zone(tz)
    found = _rule(text, start, zone_info).after(after.astimezone(zone_info), inc=False)
    return None if found is None else found.astimezone(UTC)
