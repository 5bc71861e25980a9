"""The listings `calendar_list_events` keeps in memory: recent windows of the local copy,
each with the version of the copy it was read at and its JSON text as the tool sends it."""

from __future__ import annotations

from datetime import datetime

from fastmcp.tools.base import default_serializer
from pydantic import JsonValue

from butlers.jsoncodec import loads
from butlers.modules.calendar.store import LISTING_SQL
from butlers.modules.view import Reader

ListingKey = tuple[datetime, datetime, int]  # start, end, limit
Listed = tuple[list[dict[str, JsonValue]], str]  # the events, and their JSON text as sent


class ListingCache:
    """Recent listings (JSON, as `list_instances_json` gives them) with the version of
    the copy each was read at; one is served again only while that version is current.
    After this process writes the copy, `refill` reads the most recent windows again
    (a sync's listing then finds them current); a write by another process only makes
    them stale, and the next listing of each runs the query."""

    def __init__(self, size: int = 32, refilled: int = 4) -> None:
        self.size = size
        self.refilled = refilled
        self._entries: dict[ListingKey, tuple[int, Listed]] = {}

    def get(self, key: ListingKey, version: int) -> Listed | None:
        found = self._entries.get(key)
        if found is None or found[0] != version:
            return None
        self._entries[key] = self._entries.pop(key)  # most recently used last
        return found[1]

    async def current(self, reader: Reader, key: ListingKey) -> Listed:
        """The listing of `key` at the copy's current version: the one kept, else read
        (with the version, in one statement) and kept."""
        found = self._entries.get(key)
        version, text = await reader_row(reader, key, found[0] if found else None)
        if text is None and found is not None:
            self._entries[key] = self._entries.pop(key)  # most recently used last
            return found[1]
        events: list[dict[str, JsonValue]] = loads((text or "[]").encode())
        listed = (events, default_serializer(events))
        self.put(key, version, listed)
        return listed

    def put(self, key: ListingKey, version: int, value: Listed) -> None:
        self._entries.pop(key, None)
        if len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (version, value)

    async def refill(self, reader: Reader) -> None:
        """The `refilled` most recently used windows read again at the current version
        (the version first: an entry is never marked newer than what it holds)."""
        for key in list(self._entries)[-self.refilled :]:
            self._entries.pop(key)
            await self.current(reader, key)


# The copy's version, and the listing (`list_instances_json`'s text) unless the version
# is $4: `CASE` runs the listing's subquery only when it is needed.
_CURRENT_SQL = f"""
SELECT v.version, CASE WHEN v.version IS NOT DISTINCT FROM $4::bigint THEN NULL
    ELSE ({LISTING_SQL}) END
FROM calendar_copy_version v
"""


async def reader_row(reader: Reader, key: ListingKey, kept: int | None) -> tuple[int, str | None]:
    """(version, the listing's JSON text or None when the version is `kept`)."""
    [row] = await reader.fetch(_CURRENT_SQL, *key, kept)
    return int(row[0]), row[1]
