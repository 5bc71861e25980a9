"""The calendar's local copy: sources (calendars and their sync cursors), events, instances.

The tools and the dashboard read instances from here, never from the server: a month's
listing is one indexed range query.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
from pydantic import JsonValue

from butlers.db.pool import dumps
from butlers.jsoncodec import loads
from butlers.modules.view import Reader
from butlers.stores.records import Record

if TYPE_CHECKING:
    from butlers.modules.calendar.ical import ParsedEvent

MAX_LISTED = 2000  # instances per listing
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Source(Record):
    id: uuid.UUID
    href: str
    name: str
    color: str | None
    writable: bool
    ctag: str | None
    sync_token: str | None
    last_synced_at: datetime | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class StoredEvent(Record):
    id: uuid.UUID
    source_id: uuid.UUID
    href: str
    uid: str
    etag: str | None
    ics: str
    summary: str
    starts_at: datetime
    ends_at: datetime
    all_day: bool
    rrule: str | None


@dataclass(frozen=True, slots=True)
class EventInstance(Record):
    """One occurrence of an event, as the tools and the workspace list it."""

    event_id: uuid.UUID
    uid: str
    calendar: str
    source_id: uuid.UUID
    writable: bool
    summary: str
    location: str | None
    description: str | None
    starts_at: datetime
    ends_at: datetime
    all_day: bool
    recurring: bool
    recurrence_id: str | None
    timezone: str | None
    status: str | None
    organizer: str | None
    attendees: JsonValue
    alarms: JsonValue
    updated_at: datetime


_INSTANCE_COLUMNS = """
SELECT i.event_id, e.uid, s.name AS calendar, s.id AS source_id, s.writable,
       i.summary, i.location, e.description, i.starts_at, i.ends_at, e.all_day,
       e.rrule IS NOT NULL AS recurring, i.recurrence_id, e.timezone, e.status,
       e.organizer, e.attendees, e.alarms, e.updated_at
FROM calendar_event_instances i
JOIN calendar_events e ON e.id = i.event_id
JOIN calendar_sources s ON s.id = e.source_id
"""
_INSTANCE_SQL = (
    _INSTANCE_COLUMNS
    + """WHERE i.starts_at < $2 AND (i.ends_at > $1 OR i.starts_at >= $1)
ORDER BY i.starts_at, i.event_id
LIMIT $3"""
)


async def list_instances(
    reader: Reader, start: datetime, end: datetime, limit: int = MAX_LISTED
) -> list[EventInstance]:
    """Occurrences overlapping [start, end), earliest first (the dashboard's read too)."""
    rows = await reader.fetch(_INSTANCE_SQL, start, end, limit)
    return [EventInstance.from_row(row) for row in rows]


def _utc(column: str) -> str:
    return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')"""


# One instance's listing entry (JSON text) without its calendar's fields: stored in
# `calendar_event_instances.item` when the instance is written (`save`).
ITEM_SQL = f"""json_build_object(
    'event_id', i.event_id, 'uid', e.uid, 'summary', i.summary, 'location', i.location,
    'description', e.description, 'starts_at', {_utc("i.starts_at")},
    'ends_at', {_utc("i.ends_at")}, 'all_day', e.all_day,
    'recurring', e.rrule IS NOT NULL, 'recurrence_id', i.recurrence_id,
    'timezone', e.timezone, 'status', e.status, 'organizer', e.organizer,
    'attendees', e.attendees, 'alarms', e.alarms, 'updated_at', {_utc("e.updated_at")}
)::text"""

# The listing as one JSON array, joined from the stored entries with the calendar's
# name, id and writability spliced in front (`substr(item, 2)` drops the entry's `{`).
# `ends_at >= $1` follows from the overlap test (no instance ends before it starts) and
# lets the range index skip the instances that ended before the window.
LISTING_SQL = """
SELECT '[' || coalesce(string_agg(t.item, ',' ORDER BY t.starts_at, t.event_id), '') || ']'
FROM (
    SELECT i.starts_at, i.event_id,
        '{"calendar":' || to_json(s.name)::text || ',"source_id":"' || s.id::text
        || '","writable":' || s.writable::text || ',' || substr(i.item, 2) AS item
    FROM calendar_event_instances i
    JOIN calendar_events e ON e.id = i.event_id
    JOIN calendar_sources s ON s.id = e.source_id
    WHERE i.starts_at < $2 AND i.ends_at >= $1 AND (i.ends_at > $1 OR i.starts_at >= $1)
    ORDER BY i.starts_at, i.event_id
    LIMIT $3
) t
"""


async def list_instances_json(
    reader: Reader, start: datetime, end: datetime, limit: int = MAX_LISTED
) -> list[dict[str, JsonValue]]:
    """`list_instances` as JSON objects (times in UTC), for the tools (read as text and
    decoded by the hot path's codec: a month's listing is ~150 kB of JSON)."""
    [row] = await reader.fetch(LISTING_SQL, start, end, limit)
    found: list[dict[str, JsonValue]] = loads(row[0].encode())
    return found


async def copy_version(reader: Reader) -> int:
    """The local copy's version: it changes whenever a listing could (a trigger)."""
    [row] = await reader.fetch("SELECT version FROM calendar_copy_version")
    return int(row[0])


async def list_sources(reader: Reader) -> list[Source]:
    rows = await reader.fetch(f"SELECT {Source.columns()} FROM calendar_sources ORDER BY name")
    return [Source.from_row(row) for row in rows]


class CalendarStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        # Called after each write of events (their instances) by this store.
        self.written: list[Callable[[], Awaitable[None]]] = []

    async def _wrote(self) -> None:
        for listener in list(self.written):
            try:
                await listener()
            except (asyncpg.PostgresError, OSError) as exc:  # the listing runs the query
                log.warning("calendar: listings not read again after a write: %s", exc)
            except Exception:  # the write is done: a failed refill must not undo the sync
                log.exception("calendar: reading the listings again after a write failed")

    async def upsert_source(
        self, href: str, name: str, color: str | None, writable: bool
    ) -> Source:
        row = await self.pool.fetchrow(
            f"""
            INSERT INTO calendar_sources (href, name, color, writable) VALUES ($1, $2, $3, $4)
            ON CONFLICT (href) DO UPDATE SET name = $2, color = $3, writable = $4,
                updated_at = clock_timestamp()
            RETURNING {Source.columns()}
            """,
            href,
            name,
            color,
            writable,
        )
        return Source.from_row(row)

    async def sources(self) -> list[Source]:
        return await list_sources(self.pool)

    async def source(self, source_id: uuid.UUID) -> Source | None:
        row = await self.pool.fetchrow(
            f"SELECT {Source.columns()} FROM calendar_sources WHERE id = $1", source_id
        )
        return None if row is None else Source.from_row(row)

    async def drop_sources_except(self, hrefs: Sequence[str]) -> int:
        """Forget calendars the server no longer lists (their events go with them)."""
        result = await self.pool.execute(
            "DELETE FROM calendar_sources WHERE NOT (href = ANY($1::text[]))", list(hrefs)
        )
        return int(result.split()[-1])

    async def set_cursor(
        self, source_id: uuid.UUID, ctag: str | None, sync_token: str | None
    ) -> None:
        await self.pool.execute(
            """
            UPDATE calendar_sources SET ctag = $2, sync_token = $3, last_error = NULL,
                last_synced_at = clock_timestamp(), updated_at = clock_timestamp()
            WHERE id = $1
            """,
            source_id,
            ctag,
            sync_token,
        )

    async def set_error(self, source_id: uuid.UUID, error: str) -> None:
        await self.pool.execute(
            "UPDATE calendar_sources SET last_error = $2, updated_at = clock_timestamp() "
            "WHERE id = $1",
            source_id,
            error[:2000],
        )

    async def etags(self, source_id: uuid.UUID) -> dict[str, str | None]:
        rows = await self.pool.fetch(
            "SELECT href, etag FROM calendar_events WHERE source_id = $1", source_id
        )
        return {row["href"]: row["etag"] for row in rows}

    async def save(
        self, source_id: uuid.UUID, items: Sequence[tuple[str, str | None, str, ParsedEvent]]
    ) -> None:
        """Insert or replace events (href, etag, ics, parsed) with their instances."""
        if not items:
            return
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                """
                INSERT INTO calendar_events (source_id, href, uid, etag, ics, summary,
                    description, location, starts_at, ends_at, all_day, timezone, rrule,
                    status, organizer, attendees, alarms)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                    $16::text::jsonb, $17::text::jsonb)
                ON CONFLICT (source_id, href) DO UPDATE SET uid = $3, etag = $4, ics = $5,
                    summary = $6, description = $7, location = $8, starts_at = $9,
                    ends_at = $10, all_day = $11, timezone = $12, rrule = $13, status = $14,
                    organizer = $15, attendees = $16::text::jsonb, alarms = $17::text::jsonb,
                    updated_at = clock_timestamp()
                """,
                [_event_args(source_id, href, etag, ics, e) for href, etag, ics, e in items],
            )
            rows = await conn.fetch(
                "SELECT id, href FROM calendar_events WHERE source_id = $1 "
                "AND href = ANY($2::text[])",
                source_id,
                [href for href, *_ in items],
            )
            ids = {row["href"]: row["id"] for row in rows}
            await conn.execute(
                "DELETE FROM calendar_event_instances WHERE event_id = ANY($1::uuid[])",
                list(ids.values()),
            )
            await conn.copy_records_to_table(
                "calendar_event_instances",
                records=[
                    (ids[href], i.starts_at, i.ends_at, i.recurrence_id, i.summary, i.location, "")
                    for href, _, _, parsed in items
                    for i in parsed.instances
                ],
                columns=[
                    "event_id",
                    "starts_at",
                    "ends_at",
                    "recurrence_id",
                    "summary",
                    "location",
                    "item",
                ],
            )
            await conn.execute(
                f"UPDATE calendar_event_instances i SET item = {ITEM_SQL} "
                "FROM calendar_events e WHERE e.id = i.event_id AND i.event_id = ANY($1::uuid[])",
                list(ids.values()),
            )
        await self._wrote()

    async def remove(self, source_id: uuid.UUID, hrefs: Sequence[str]) -> int:
        result = await self.pool.execute(
            "DELETE FROM calendar_events WHERE source_id = $1 AND href = ANY($2::text[])",
            source_id,
            list(hrefs),
        )
        await self._wrote()
        return int(result.split()[-1])

    async def event(self, event_id: uuid.UUID) -> StoredEvent | None:
        row = await self.pool.fetchrow(
            f"SELECT {StoredEvent.columns()} FROM calendar_events WHERE id = $1", event_id
        )
        return None if row is None else StoredEvent.from_row(row)

    async def first_instance(self, event_id: uuid.UUID) -> EventInstance | None:
        """The event's next occurrence from now, else its last one (within the window)."""
        row = await self.pool.fetchrow(
            _INSTANCE_COLUMNS + "WHERE i.event_id = $1 ORDER BY i.ends_at < clock_timestamp(), "
            "CASE WHEN i.ends_at < clock_timestamp() THEN -extract(epoch FROM i.starts_at) "
            "ELSE extract(epoch FROM i.starts_at) END LIMIT 1",
            event_id,
        )
        return None if row is None else EventInstance.from_row(row)

    async def busy_instances(
        self, source_id: uuid.UUID, start: datetime, end: datetime, limit: int
    ) -> list[tuple[datetime, datetime, str]]:
        """(start, end, status) of one calendar's occurrences overlapping [start, end)
        that take time: neither cancelled nor transparent."""
        rows = await self.pool.fetch(
            """
            SELECT i.starts_at, i.ends_at, coalesce(upper(e.status), 'CONFIRMED') AS status
            FROM calendar_event_instances i
            JOIN calendar_events e ON e.id = i.event_id
            WHERE e.source_id = $1 AND i.starts_at < $3 AND i.ends_at > $2
              AND coalesce(upper(e.status), '') <> 'CANCELLED'
              AND position('TRANSP:TRANSPARENT' in e.ics) = 0
            ORDER BY i.starts_at LIMIT $4
            """,
            source_id,
            start,
            end,
            limit,
        )
        return [(row["starts_at"], row["ends_at"], row["status"]) for row in rows]

    async def occurrence(self, event_id: uuid.UUID, recurrence_id: str) -> EventInstance | None:
        row = await self.pool.fetchrow(
            _INSTANCE_COLUMNS + "WHERE i.event_id = $1 AND i.recurrence_id = $2",
            event_id,
            recurrence_id,
        )
        return None if row is None else EventInstance.from_row(row)

    async def busy(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """Busy intervals overlapping [start, end): instances of events not cancelled,
        not transparent, merged."""
        rows = await self.pool.fetch(
            """
            SELECT i.starts_at, i.ends_at FROM calendar_event_instances i
            JOIN calendar_events e ON e.id = i.event_id
            WHERE i.starts_at < $2 AND i.ends_at > $1
              AND coalesce(upper(e.status), '') <> 'CANCELLED'
              AND position('TRANSP:TRANSPARENT' in e.ics) = 0
            ORDER BY i.starts_at
            """,
            start,
            end,
        )
        merged: list[tuple[datetime, datetime]] = []
        for row in rows:
            begin, finish = row["starts_at"], row["ends_at"]
            if merged and begin <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], finish))
            else:
                merged.append((begin, finish))
        return merged


def _event_args(
    source_id: uuid.UUID, href: str, etag: str | None, ics: str, e: ParsedEvent
) -> tuple[Any, ...]:
    return (
        source_id,
        href,
        e.uid,
        etag,
        ics,
        e.summary,
        e.description,
        e.location,
        e.starts_at,
        e.ends_at,
        e.all_day,
        e.timezone,
        e.rrule,
        e.status,
        e.organizer,
        dumps(e.attendees),
        dumps(e.alarms),
    )
