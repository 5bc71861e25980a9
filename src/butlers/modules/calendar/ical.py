"""iCalendar (RFC 5545) objects: read an event, expand its recurrence, write one back.

Times are stored as instants. An event with a `TZID` recurs in that zone (09:00 stays
09:00 across a daylight-saving change); a floating time or an all-day date is read in the
owner's zone. Expansion covers a bounded window and at most `MAX_INSTANCES` per event.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr
from icalendar import Alarm, Calendar, Event, vCalAddress, vRecur

MAX_INSTANCES = 2000  # per event and window
MAX_ATTENDEES = 200
MAX_ALARMS = 10
PRODID = "-//butlers//calendar//EN"


class IcalError(ValueError):
    """The object is not an event this module can read."""


@dataclass(frozen=True, slots=True)
class Instance:
    starts_at: datetime
    ends_at: datetime
    recurrence_id: str | None
    summary: str
    location: str | None


@dataclass(frozen=True, slots=True)
class ParsedEvent:
    uid: str
    summary: str
    description: str | None
    location: str | None
    starts_at: datetime
    ends_at: datetime
    all_day: bool
    timezone: str | None
    rrule: str | None
    status: str | None
    organizer: str | None
    attendees: list[dict[str, Any]]
    alarms: list[dict[str, Any]]
    instances: list[Instance]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _zone(value: Any) -> ZoneInfo | None:
    tz = getattr(value, "tzinfo", None)
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return ZoneInfo(key)
    return None


def _instant(value: date | datetime, owner: ZoneInfo) -> datetime:
    """An aware instant: dates start at midnight and floating times are read in `owner`."""
    if not isinstance(value, datetime):
        return datetime.combine(value, time(), owner)
    if value.tzinfo is None:
        return value.replace(tzinfo=owner)
    return value


def _start_end(event: Any, owner: ZoneInfo) -> tuple[date | datetime, date | datetime]:
    if "DTSTART" not in event:
        raise IcalError("the event has no DTSTART")
    start = event["DTSTART"].dt
    if "DTEND" in event:
        end = event["DTEND"].dt
    elif "DURATION" in event:
        end = start + event["DURATION"].dt
    elif isinstance(start, datetime):
        end = start
    else:
        end = start + timedelta(days=1)
    return start, end


def _recurrence_key(value: date | datetime, owner: ZoneInfo) -> str:
    return _instant(value, owner).astimezone(UTC).isoformat()


def _rule_text(event: Any, start: date | datetime) -> str | None:
    """The RRULE with its UNTIL of the same kind (aware, naive) as `start`."""
    rule = event.get("RRULE")
    if rule is None:
        return None
    parts = vRecur(dict(rule))
    until = parts.get("UNTIL")
    if until:
        value = until[0]
        aware = isinstance(start, datetime) and start.tzinfo is not None
        if isinstance(value, datetime):
            if aware and value.tzinfo is None:
                value = value.replace(tzinfo=start.tzinfo)  # type: ignore[union-attr]
            elif not aware and value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
        elif aware:
            value = datetime.combine(value, time(23, 59, 59), start.tzinfo)  # type: ignore[union-attr]
        else:
            value = datetime.combine(value, time(23, 59, 59))
        if isinstance(value, datetime) and value.tzinfo is not None:
            value = value.astimezone(UTC)
        parts["UNTIL"] = [value]
    text: str = parts.to_ical().decode()  # type: ignore[no-untyped-call, unused-ignore]
    return text


def _dates(event: Any, name: str) -> list[date | datetime]:
    found = event.get(name)
    if found is None:
        return []
    lists = found if isinstance(found, list) else [found]
    return [item.dt for entry in lists for item in entry.dts]


def _occurrences(
    event: Any, owner: ZoneInfo, window: tuple[datetime, datetime]
) -> tuple[list[tuple[datetime, datetime, str | None]], str | None]:
    """(start, end, recurrence key) of the master's occurrences within `window`, and its rule."""
    start, end = _start_end(event, owner)
    duration = _instant(end, owner) - _instant(start, owner)
    rule = _rule_text(event, start)
    lo, hi = window
    if rule is None and "RDATE" not in event:
        first = _instant(start, owner)
        return [(first, first + duration, None)], None
    seed = start if isinstance(start, datetime) else datetime.combine(start, time())
    excluded = {_recurrence_key(value, owner) for value in _dates(event, "EXDATE")}
    starts: list[date | datetime] = []
    if rule is not None:
        for index, value in enumerate(rrulestr(rule, dtstart=seed, cache=False)):
            if index >= 100_000 or _instant(value, owner) >= hi:
                break
            starts.append(value if isinstance(start, datetime) else value.date())
    else:
        starts.append(start)
    starts.extend(_dates(event, "RDATE"))
    found = []
    for value in starts:
        key = _recurrence_key(value, owner)
        begin = _instant(value, owner)
        if key in excluded or begin >= hi or begin + duration <= lo:
            continue
        found.append((begin, begin + duration, key))
        if len(found) >= MAX_INSTANCES:
            break
    return sorted(found), rule


def _attendees(event: Any) -> list[dict[str, Any]]:
    found = event.get("ATTENDEE")
    if found is None:
        return []
    people = found if isinstance(found, list) else [found]
    return [
        {
            "email": str(person).removeprefix("mailto:").removeprefix("MAILTO:"),
            "name": _text(person.params.get("CN")),
            "role": _text(person.params.get("ROLE")),
            "status": _text(person.params.get("PARTSTAT")),
        }
        for person in people[:MAX_ATTENDEES]
    ]


def _alarms(event: Any) -> list[dict[str, Any]]:
    alarms = []
    for alarm in event.walk("VALARM")[:MAX_ALARMS]:
        trigger = alarm.get("TRIGGER")
        value = getattr(trigger, "dt", None)
        entry: dict[str, Any] = {"action": _text(alarm.get("ACTION"))}
        if isinstance(value, timedelta):
            entry["minutes_before"] = int(-value.total_seconds() // 60)
        elif isinstance(value, datetime):
            entry["at"] = value.isoformat()
        alarms.append(entry)
    return alarms


def parse(ics: str, owner: ZoneInfo, window: tuple[datetime, datetime]) -> ParsedEvent:
    """The event in one calendar object, with its instances within `window`."""
    try:
        calendar: Any = Calendar.from_ical(ics)
    except ValueError as exc:
        raise IcalError(f"not iCalendar: {exc}") from exc
    events = calendar.walk("VEVENT")
    masters = [event for event in events if "RECURRENCE-ID" not in event]
    if not events:
        raise IcalError("the object holds no VEVENT")
    master = masters[0] if masters else events[0]
    start, end = _start_end(master, owner)
    occurrences, rule = _occurrences(master, owner, window)
    summary = str(master.get("SUMMARY", ""))
    location = _text(master.get("LOCATION"))
    instances = {
        key or "": Instance(begin, finish, key, summary, location)
        for begin, finish, key in occurrences
    }
    for override in events:
        if "RECURRENCE-ID" not in override or override is master:
            continue
        key = _recurrence_key(override["RECURRENCE-ID"].dt, owner)
        instances.pop(key, None)
        if str(override.get("STATUS", "")).upper() == "CANCELLED":
            continue
        begin_value, end_value = _start_end(override, owner)
        begin, finish = _instant(begin_value, owner), _instant(end_value, owner)
        if begin < window[1] and finish > window[0]:
            instances[key] = Instance(
                begin,
                finish,
                key,
                str(override.get("SUMMARY", summary)),
                _text(override.get("LOCATION", location)),
            )
    organizer = master.get("ORGANIZER")
    return ParsedEvent(
        uid=str(master.get("UID", "")) or str(uuid.uuid4()),
        summary=summary,
        description=_text(master.get("DESCRIPTION")),
        location=location,
        starts_at=_instant(start, owner),
        ends_at=_instant(end, owner),
        all_day=not isinstance(start, datetime),
        timezone=_zone(start).key if _zone(start) else None,  # type: ignore[union-attr]
        rrule=rule,
        status=_text(master.get("STATUS")),
        organizer=None if organizer is None else str(organizer).removeprefix("mailto:"),
        attendees=_attendees(master),
        alarms=_alarms(master),
        instances=sorted(instances.values(), key=lambda item: item.starts_at),
    )


@dataclass(frozen=True, slots=True)
class EventFields:
    """What a tool may set on an event; None leaves a field as it is."""

    summary: str | None = None
    start: date | datetime | None = None
    end: date | datetime | None = None
    description: str | None = None
    location: str | None = None
    rrule: str | None = None  # "" removes the rule
    attendees: Sequence[Mapping[str, Any]] | None = None
    alarms_minutes_before: Sequence[int] | None = None


def _set(event: Any, name: str, value: Any) -> None:
    if name in event:
        del event[name]
    if value is not None and value != "":
        event.add(name, value)


def _apply(event: Any, fields: EventFields) -> None:
    if fields.summary is not None:
        _set(event, "SUMMARY", fields.summary)
    if fields.description is not None:
        _set(event, "DESCRIPTION", fields.description)
    if fields.location is not None:
        _set(event, "LOCATION", fields.location)
    if fields.start is not None:
        _set(event, "DTSTART", fields.start)
    if fields.end is not None:
        _set(event, "DURATION", None)
        _set(event, "DTEND", fields.end)
    if fields.rrule is not None:
        _set(event, "RRULE", vRecur.from_ical(fields.rrule) if fields.rrule else None)
    if fields.attendees is not None:
        _set(event, "ATTENDEE", None)
        for person in fields.attendees[:MAX_ATTENDEES]:
            address = vCalAddress(f"mailto:{person['email']}")
            if person.get("name"):
                address.params["CN"] = str(person["name"])
            address.params["ROLE"] = str(person.get("role") or "REQ-PARTICIPANT")
            address.params["PARTSTAT"] = str(person.get("status") or "NEEDS-ACTION")
            event.add("ATTENDEE", address, encode=False)
    if fields.alarms_minutes_before is not None:
        event.subcomponents = [c for c in event.subcomponents if c.name != "VALARM"]
        for minutes in fields.alarms_minutes_before[:MAX_ALARMS]:
            alarm = Alarm()
            alarm.add("ACTION", "DISPLAY")
            alarm.add("DESCRIPTION", str(event.get("SUMMARY", "Reminder")))
            alarm.add("TRIGGER", timedelta(minutes=-minutes))
            event.add_component(alarm)


def _stamp(event: Any) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    _set(event, "DTSTAMP", now)
    _set(event, "LAST-MODIFIED", now)


def _serialise(calendar: Any) -> str:
    calendar.add_missing_timezones()
    text: str = calendar.to_ical().decode()
    return text


def build(uid: str, fields: EventFields) -> str:
    """A new calendar object holding one event."""
    calendar = Calendar()
    calendar.add("PRODID", PRODID)
    calendar.add("VERSION", "2.0")
    event = Event()
    event.add("UID", uid)
    event.add("SEQUENCE", 0)
    _stamp(event)
    _apply(event, fields)
    calendar.add_component(event)
    return _serialise(calendar)


def amend(ics: str, fields: EventFields) -> str:
    """`ics` with its series (the master event) changed by `fields`, its SEQUENCE bumped."""
    calendar: Any = Calendar.from_ical(ics)
    masters = [e for e in calendar.walk("VEVENT") if "RECURRENCE-ID" not in e]
    if not masters:
        raise IcalError("the object holds no master VEVENT to change")
    event = masters[0]
    sequence = int(event.get("SEQUENCE", 0)) + 1
    _apply(event, fields)
    _set(event, "SEQUENCE", sequence)
    _stamp(event)
    return _serialise(calendar)


# One occurrence of a recurring event. It is named by its recurrence id: its original start
# as a UTC instant (`Instance.recurrence_id`, what the listing shows). A change is an
# override VEVENT with that RECURRENCE-ID in the same object; a cancellation an EXDATE on
# the series (and its override, if any, removed), as RFC 5545 describes.
_COPIED = (
    "SUMMARY", "DESCRIPTION", "LOCATION", "ORGANIZER", "ATTENDEE", "STATUS", "TRANSP",
    "CLASS", "CATEGORIES", "PRIORITY", "URL",
)  # fmt: skip


def _master_of(calendar: Any) -> Any:
    masters = [e for e in calendar.walk("VEVENT") if "RECURRENCE-ID" not in e]
    if not masters:
        raise IcalError("the object holds no master VEVENT to change")
    return masters[0]


def recurrence_key(recurrence_id: str, owner: ZoneInfo) -> str:
    """`recurrence_id` as the listing stores it (a UTC instant); a time without an
    offset is the owner's."""
    try:
        instant = datetime.fromisoformat(recurrence_id)
    except ValueError:
        raise IcalError(
            f"recurrence_id {recurrence_id!r} is not a time (use an occurrence's "
            "`recurrence_id` from calendar_list_events)"
        ) from None
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=owner)
    return instant.astimezone(UTC).isoformat()


def _original(master: Any, recurrence_id: str, owner: ZoneInfo) -> date | datetime:
    """The occurrence's original start in the form of the series' DTSTART (a date, a
    floating time, or a time in DTSTART's zone), checked against the series' rule."""
    if "RRULE" not in master and "RDATE" not in master:
        raise IcalError("the event does not recur: change it with calendar_update_event")
    key = recurrence_key(recurrence_id, owner)
    instant = datetime.fromisoformat(key)
    window = (instant - timedelta(seconds=1), instant + timedelta(seconds=1))
    occurrences, _ = _occurrences(master, owner, window)
    if key not in {found for _, _, found in occurrences}:
        raise IcalError(
            f"the series has no occurrence starting {key} (cancelled, or not on its rule); "
            "list its occurrences with calendar_list_events"
        )
    start = master["DTSTART"].dt
    if not isinstance(start, datetime):
        return instant.astimezone(owner).date()
    if start.tzinfo is None:
        return instant.astimezone(owner).replace(tzinfo=None)
    return instant.astimezone(start.tzinfo)


def _overrides(calendar: Any, key: str, owner: ZoneInfo) -> list[Any]:
    return [
        e
        for e in calendar.walk("VEVENT")
        if "RECURRENCE-ID" in e and _recurrence_key(e["RECURRENCE-ID"].dt, owner) == key
    ]


def _sequence(*events: Any) -> int:
    return max(int(event.get("SEQUENCE", 0)) for event in events) + 1


def amend_occurrence(ics: str, recurrence_id: str, fields: EventFields, owner: ZoneInfo) -> str:
    """`ics` with one occurrence of its series changed (moved when `fields` has a start;
    its length kept unless `fields` has an end), through an override VEVENT."""
    if fields.rrule is not None:
        raise IcalError("one occurrence has no rule of its own: change the series' rule")
    calendar: Any = Calendar.from_ical(ics)
    master = _master_of(calendar)
    original = _original(master, recurrence_id, owner)
    key = _recurrence_key(original, owner)
    found = _overrides(calendar, key, owner)
    if found:
        override = found[0]
    else:
        begin, finish = _start_end(master, owner)
        override = Event()
        override.add("UID", str(master.get("UID", "")))
        override.add("RECURRENCE-ID", original)
        override.add("DTSTART", original)
        override.add("DTEND", original + (finish - begin))  # type: ignore[operator]
        for name in _COPIED:
            if name in master:
                override[name] = copy.deepcopy(master[name])
        for alarm in master.walk("VALARM"):
            override.add_component(copy.deepcopy(alarm))
        calendar.add_component(override)
    if fields.start is not None and fields.end is None:
        begin, finish = _start_end(override, owner)
        length = _instant(finish, owner) - _instant(begin, owner)
        if isinstance(fields.start, datetime):
            fields = replace(fields, end=fields.start + length)
        else:
            fields = replace(fields, end=fields.start + timedelta(days=max(1, length.days)))
    sequence = _sequence(master, override)
    _apply(override, fields)
    _set(override, "SEQUENCE", sequence)
    _stamp(override)
    return _serialise(calendar)


def cancel_occurrence(ics: str, recurrence_id: str, owner: ZoneInfo) -> str:
    """`ics` with one occurrence of its series excluded (EXDATE; its override removed)."""
    calendar: Any = Calendar.from_ical(ics)
    master = _master_of(calendar)
    original = _original(master, recurrence_id, owner)
    key = _recurrence_key(original, owner)
    dropped = _overrides(calendar, key, owner)
    calendar.subcomponents = [c for c in calendar.subcomponents if all(c is not d for d in dropped)]
    master.add("EXDATE", original)
    _set(master, "SEQUENCE", _sequence(master, *dropped))
    _stamp(master)
    return _serialise(calendar)
