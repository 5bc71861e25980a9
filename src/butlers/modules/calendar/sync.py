"""Keeping the local copy in step with the CalDAV server, and writing changes back.

Per calendar: a sync token when the server has one (RFC 6578), else the calendar's ctag
and a comparison of ETags; only changed objects are fetched (multiget). Writes carry the
ETag last read, so an edit made on the server in between is a `Conflict`: the local copy
is refreshed from the server and the caller is told, nothing is overwritten.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from butlers.modules.calendar import ical
from butlers.modules.calendar.caldav import (
    CalDavClient,
    CalDavError,
    Collection,
    Conflict,
    SyncTokenInvalid,
)
from butlers.modules.calendar.store import CalendarStore, Source, StoredEvent

log = logging.getLogger(__name__)
REEXPAND_EVERY = timedelta(hours=12)
REDISCOVER_EVERY = timedelta(minutes=15)  # calendars added or removed on the server


@dataclass
class SourceReport:
    calendar: str
    mode: str  # "token", "etag", "unchanged" or "failed"
    changed: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)
    error: str | None = None


class CalendarSync:
    def __init__(
        self,
        client: CalDavClient,
        store: CalendarStore,
        owner: ZoneInfo,
        past_days: int,
        future_days: int,
    ) -> None:
        self.client = client
        self.store = store
        self.owner = owner
        self.past = timedelta(days=past_days)
        self.future = timedelta(days=future_days)
        self.lock = asyncio.Lock()
        self.expanded_at: datetime | None = None
        self.discovered_at: datetime | None = None
        self.last_sync: datetime | None = None

    def window(self) -> tuple[datetime, datetime]:
        now = datetime.now(UTC)
        return now - self.past, now + self.future

    def parse(self, ics: str) -> ical.ParsedEvent:
        return ical.parse(ics, self.owner, self.window())

    async def sync(self, discover: bool = True) -> list[SourceReport]:
        """Bring each calendar's copy up to date, after discovering the calendars (always
        when `discover`, else when the last discovery is older than REDISCOVER_EVERY)."""
        async with self.lock:
            now = datetime.now(UTC)
            known = await self.store.sources()
            recent = self.discovered_at is not None and now - self.discovered_at < REDISCOVER_EVERY
            rediscover = discover or not known or not recent
            if rediscover:
                collections = await self.client.discover()
                self.discovered_at = now
            else:
                collections = [await self._known(source) for source in known]
            reports = []
            for collection in collections:
                source = await self.store.upsert_source(
                    collection.href, collection.name, collection.color, collection.writable
                )
                try:
                    reports.append(await self._sync_source(source, collection))
                except CalDavError as exc:
                    await self.store.set_error(source.id, str(exc))
                    reports.append(SourceReport(source.name, "failed", error=str(exc)))
            if rediscover:
                await self.store.drop_sources_except([c.href for c in collections])
            await self._reexpand_if_due()
            self.last_sync = datetime.now(UTC)
            return reports

    async def _known(self, source: Source) -> Collection:
        """A calendar as last discovered: its token suffices, else its ctag is read now."""
        ctag, token = (None, source.sync_token)
        if not token:
            ctag, token = await self.client.collection_tags(source.href)
        return Collection(source.href, source.name, source.color, ctag, token, source.writable)

    async def _sync_source(self, source: Source, collection: Collection) -> SourceReport:
        report = SourceReport(source.name, "token")
        changed: dict[str, str | None] | None = None
        removed: list[str] = []
        token = None
        if source.sync_token:
            try:
                changed, removed, token = await self.client.sync_collection(
                    source.href, source.sync_token
                )
            except SyncTokenInvalid:
                log.info("calendar %s: sync token refused, comparing ETags", source.name)
        ctag = collection.ctag
        if changed is None:
            if ctag and ctag == source.ctag and source.last_synced_at is not None:
                report.mode = "unchanged"
                return report
            report.mode = "etag"
            token = collection.sync_token  # read before the listing: nothing is missed
            on_server = await self.client.etags(source.href)
            local = await self.store.etags(source.id)
            changed = {h: e for h, e in on_server.items() if e is None or local.get(h) != e}
            removed = [h for h in local if h not in on_server]
        local = await self.store.etags(source.id)
        wanted = [h for h, e in changed.items() if e is None or local.get(h) != e]
        resources = await self.client.multiget(source.href, wanted)
        items = []
        for resource in resources:
            try:
                items.append((resource.href, resource.etag, resource.ics, self.parse(resource.ics)))
            except (ical.IcalError, ValueError, KeyError) as exc:
                log.warning("calendar %s: skipped %s: %s", source.name, resource.href, exc)
                report.skipped.append(f"{resource.href}: {exc}")
        await self.store.save(source.id, items)
        report.changed = len(items)
        report.removed = await self.store.remove(source.id, removed) if removed else 0
        await self.store.set_cursor(source.id, ctag, token)
        return report

    async def _reexpand_if_due(self) -> None:
        """Recurring events are expanded within a window that moves with time."""
        now = datetime.now(UTC)
        if self.expanded_at is not None and now - self.expanded_at < REEXPAND_EVERY:
            return
        self.expanded_at = now
        rows = await self.store.pool.fetch(
            "SELECT source_id, href, etag, ics FROM calendar_events WHERE rrule IS NOT NULL"
        )
        by_source: dict[uuid.UUID, list[Any]] = {}
        for row in rows:
            try:
                parsed = self.parse(row["ics"])
            except (ical.IcalError, ValueError, KeyError):
                continue
            by_source.setdefault(row["source_id"], []).append(
                (row["href"], row["etag"], row["ics"], parsed)
            )
        for source_id, items in by_source.items():
            await self.store.save(source_id, items)

    async def refresh(self, event: StoredEvent) -> None:
        """Re-read one event from the server (after a conflict)."""
        try:
            resource = await self.client.get(event.href)
        except CalDavError as exc:
            if "HTTP 404" in str(exc):
                await self.store.remove(event.source_id, [event.href])
                return
            raise
        parsed = self.parse(resource.ics)
        await self.store.save(event.source_id, [(event.href, resource.etag, resource.ics, parsed)])

    async def create(self, source: Source, fields: ical.EventFields) -> uuid.UUID:
        uid = str(uuid.uuid4())
        href = f"{source.href.rstrip('/')}/{uid}.ics"
        ics = ical.build(uid, fields)
        parsed = self.parse(ics)
        etag = await self.client.put(href, ics, None)
        await self.store.save(source.id, [(href, etag, ics, parsed)])
        [event_id] = [e for e in await self._ids(source.id, [href])]
        return event_id

    async def update(self, event: StoredEvent, fields: ical.EventFields) -> None:
        await self._rewrite(event, ical.amend(event.ics, fields))

    async def update_occurrence(
        self, event: StoredEvent, recurrence_id: str, fields: ical.EventFields
    ) -> None:
        """Change one occurrence of a series (an override in the same object)."""
        await self._rewrite(
            event, ical.amend_occurrence(event.ics, recurrence_id, fields, self.owner)
        )

    async def cancel_occurrence(self, event: StoredEvent, recurrence_id: str) -> None:
        """Remove one occurrence of a series (an EXDATE in the same object)."""
        await self._rewrite(event, ical.cancel_occurrence(event.ics, recurrence_id, self.owner))

    async def _rewrite(self, event: StoredEvent, ics: str) -> None:
        """Write `ics` in place of the event, only if the server still has what was read."""
        parsed = self.parse(ics)
        try:
            etag = await self.client.put(event.href, ics, event.etag or "*")
        except Conflict:
            await self.refresh(event)
            raise
        await self.store.save(event.source_id, [(event.href, etag, ics, parsed)])

    async def delete(self, event: StoredEvent) -> None:
        try:
            await self.client.delete(event.href, event.etag)
        except Conflict:
            await self.refresh(event)
            raise
        await self.store.remove(event.source_id, [event.href])

    async def _ids(self, source_id: uuid.UUID, hrefs: list[str]) -> list[uuid.UUID]:
        rows = await self.store.pool.fetch(
            "SELECT id FROM calendar_events WHERE source_id = $1 AND href = ANY($2::text[])",
            source_id,
            hrefs,
        )
        return [row["id"] for row in rows]
