"""The calendar module: the owner's CalDAV calendars, synced into the butler's schema.

`caldav.py` speaks WebDAV/CalDAV (RFC 4918, 4791, 6578), `ical.py` reads and writes
iCalendar (RFC 5545) and expands recurrences, `sync.py` keeps the local copy, `store.py`
holds the SQL, `module.py` the tools. Nothing is imported here.
"""
