"""Reading and writing iCalendar events: overrides, owner's zone, UNTIL, amendments."""

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from icalendar import Calendar

from butlers.modules.calendar import ical

PARIS = ZoneInfo("Europe/Paris")
WINDOW = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def _wrap(*events: str) -> str:
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n"
        + "".join(events)
        + ("END:VCALENDAR\r\n")
    )


def test_an_override_moves_one_occurrence_and_a_cancelled_one_is_gone() -> None:
    master = (
        "BEGIN:VEVENT\r\nUID:u\r\nDTSTAMP:20260101T000000Z\r\n"
        "DTSTART:20260601T100000Z\r\nDTEND:20260601T110000Z\r\n"
        "RRULE:FREQ=DAILY;COUNT=3\r\nSUMMARY:Daily\r\nEND:VEVENT\r\n"
    )
    moved = (
        "BEGIN:VEVENT\r\nUID:u\r\nDTSTAMP:20260101T000000Z\r\nRECURRENCE-ID:20260602T100000Z\r\n"
        "DTSTART:20260602T150000Z\r\nDTEND:20260602T160000Z\r\nSUMMARY:Moved\r\nEND:VEVENT\r\n"
    )
    cancelled = (
        "BEGIN:VEVENT\r\nUID:u\r\nDTSTAMP:20260101T000000Z\r\nRECURRENCE-ID:20260603T100000Z\r\n"
        "DTSTART:20260603T100000Z\r\nSTATUS:CANCELLED\r\nSUMMARY:Daily\r\nEND:VEVENT\r\n"
    )
    parsed = ical.parse(_wrap(master, moved, cancelled), PARIS, WINDOW)
    assert [(i.starts_at.hour, i.summary) for i in parsed.instances] == [
        (10, "Daily"),
        (15, "Moved"),
    ]


def test_dates_and_floating_times_are_the_owners_and_until_may_be_a_date() -> None:
    all_day = (
        "BEGIN:VEVENT\r\nUID:a\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;VALUE=DATE:20260704\r\n"
        "SUMMARY:Holiday\r\nEND:VEVENT\r\n"
    )
    parsed = ical.parse(_wrap(all_day), PARIS, WINDOW)
    assert parsed.all_day and parsed.starts_at == datetime(2026, 7, 4, tzinfo=PARIS)
    assert parsed.ends_at == datetime(2026, 7, 5, tzinfo=PARIS)
    weekly = (
        "BEGIN:VEVENT\r\nUID:w\r\nDTSTAMP:20260101T000000Z\r\n"
        "DTSTART;TZID=Europe/Paris:20260105T090000\r\nDURATION:PT30M\r\n"
        "RRULE:FREQ=WEEKLY;UNTIL=20260119\r\nSUMMARY:Weekly\r\nEND:VEVENT\r\n"
    )
    parsed = ical.parse(_wrap(weekly), PARIS, WINDOW)
    assert [i.starts_at.astimezone(PARIS).day for i in parsed.instances] == [5, 12, 19]
    floating = (
        "BEGIN:VEVENT\r\nUID:f\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260801T080000\r\n"
        "SUMMARY:Floating\r\nEND:VEVENT\r\n"
    )
    [instance] = ical.parse(_wrap(floating), PARIS, WINDOW).instances
    assert instance.starts_at.astimezone(UTC).hour == 6  # 08:00 in Paris, summer


def test_amending_changes_the_series_and_bumps_its_sequence() -> None:
    fields = ical.EventFields(
        summary="Yoga",
        start=datetime(2026, 3, 2, 18, tzinfo=PARIS),
        end=datetime(2026, 3, 2, 19, tzinfo=PARIS),
        rrule="FREQ=WEEKLY",
        alarms_minutes_before=[10],
    )
    built = ical.build("uid-1", fields)
    changed = ical.amend(built, ical.EventFields(summary="Pilates", rrule=""))
    [event] = Calendar.from_ical(changed).walk("VEVENT")
    assert str(event["SUMMARY"]) == "Pilates" and "RRULE" not in event
    assert int(event["SEQUENCE"]) == 1 and len(event.walk("VALARM")) == 1
    assert event["DTSTART"].dt == datetime(2026, 3, 2, 18, tzinfo=PARIS)
    assert ical.parse(changed, PARIS, WINDOW).rrule is None
    assert date(2026, 3, 2) == ical.parse(changed, PARIS, WINDOW).starts_at.date()
