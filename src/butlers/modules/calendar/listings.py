"""The listings `calendar_list_events` keeps in memory: recent windows of the local copy,
each with the version of the copy it was read at and its JSON text as the tool sends it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastmcp.tools.base import default_serializer
from pydantic import JsonValue

from butlers.modules.calendar.store import MAX_LISTED, copy_version, list_instances_json
from butlers.modules.view import Reader

ListingKey = tuple[datetime, datetime, int]  # start, end, limit


class ListingCache:
    """Recent listings (JSON, as `list_instances_json` gives them) with the version of
    the copy each was read at; one is served again only while that version is current.
    After this process writes the copy, `refill` reads the most recent windows again
    (a sync's listing then finds them current); a write by another process only makes
    them stale, and the next listing of each runs the query."""

    def __init__(self, size: int = 32, refilled: int = 4) -> None:
        self.size = size
        self.refilled = refilled
        self._entries: dict[ListingKey, tuple[int, Any]] = {}

    def get(self, key: ListingKey, version: int) -> Any | None:
        found = self._entries.get(key)
        if found is None or found[0] != version:
            return None
        self._entries[key] = self._entries.pop(key)  # most recently used last
        return found[1]

    def put(self, key: ListingKey, version: int, value: Any) -> None:
        self._entries.pop(key, None)
        if len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (version, value)

    async def refill(self, reader: Reader) -> None:
        """The `refilled` most recently used windows read again at the current version
        (the version first: an entry is never marked newer than what it holds)."""
        for key in list(self._entries)[-self.refilled :]:
            version = await copy_version(reader)
            self.put(key, version, await listing(reader, *key))


async def listing(
    reader: Reader, start: datetime, end: datetime, limit: int = MAX_LISTED
) -> tuple[list[dict[str, JsonValue]], str]:
    """`list_instances_json` and its text as FastMCP writes it (what the tool sends)."""
    events = await list_instances_json(reader, start, end, limit)
    return events, default_serializer(events)
