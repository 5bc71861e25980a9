"""The change feed: butlers' `pg_notify` hints in, SSE events out.

One connection LISTENs on `butlers_changes`. Hints are batched per butler and
table, the rows re-read (one query per batch) and published as events. When the
LISTEN connection drops, the feed polls each butler's tables for rows changed
since its watermark every `poll_interval` seconds while it reconnects; after a
reconnect one more poll catches what happened in between (a connection lost while
being set up is replaced like any other). A re-read that fails is followed by such a
poll too. Each (row, state) is published once, whichever way it was seen.

That catch-up poll compares against a baseline per butler (its watermark and its
schedules as last read), so each butler's baseline is taken as soon as the feed
learns of it (`poke()` by discovery, or at the next health check), not at the
first reconnect: a butler first polled only then would have the rows changed
while LISTEN was down counted as its starting state, and never published. A
baseline is only a reference for later polls: a hint for a row in it still
publishes the row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from butlers.dashboard.changes import CHANNEL, ChangeSource, Emit, schedule_deleted, sources
from butlers.dashboard.db import CONNECTION_ERRORS, DatabaseManager, describe_failure
from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.events import EventBroker

log = logging.getLogger(__name__)
LISTEN_APPLICATION = "butlers-dashboard-listen"
HEALTH_INTERVAL = 5.0
OVERLAP = timedelta(seconds=5)  # rows committed a little after their timestamp
MAX_PENDING = 10_000
SEEN_LIMIT = 20_000
_LOST = (TimeoutError, asyncpg.PostgresError, *CONNECTION_ERRORS)  # the LISTEN connection


class ChangeFeed:
    def __init__(
        self,
        dsn: str,
        db: DatabaseManager,
        butlers: Callable[[], dict[str, ButlerInfo]],
        broker: EventBroker,
        *,
        poll_interval: float = 0.5,
    ) -> None:
        self._dsn = dsn
        self._db = db
        self._butlers = butlers
        self._broker = broker
        self.poll_interval = poll_interval
        self.mode = "starting"  # listen | poll
        self.listener_pid: int | None = None
        self._pending: dict[tuple[str, str], set[str]] = {}
        self._pending_count = 0
        self._catch_up = False  # hints were dropped or failed: a catch-up poll follows the flush
        self._flush_task: asyncio.Task[None] | None = None
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._watermarks: dict[str, datetime] = {}
        self._schedules: dict[str, dict[str, Any]] = {}  # butler → schedule id → updated_at
        self.reconnects = 0
        self._poll_errors: dict[str, str] = {}
        self._wake = asyncio.Event()  # the butlers changed, or the LISTEN connection is lost

    def poke(self) -> None:
        """The set of butlers changed: take the new ones' baselines now."""
        self._wake.set()

    # -- the owner task ----------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                try:
                    conn = await asyncpg.connect(
                        self._dsn,
                        timeout=5,
                        server_settings={"application_name": LISTEN_APPLICATION},
                    )
                except _LOST as exc:
                    await self._poll_while_down(exc)
                    continue
                failure: BaseException | None = None
                try:
                    await self._listen(conn)
                except _LOST as exc:
                    failure = exc  # lost while being set up: reconnect, the feed never ends
                finally:
                    self.listener_pid = None
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 2)
                self.reconnects += 1
                if failure is not None:
                    await self._poll_while_down(failure)
        finally:
            if self._flush_task is not None:
                self._flush_task.cancel()

    async def _poll_while_down(self, failure: BaseException) -> None:
        """No LISTEN connection: one poll, then a pause before the next attempt."""
        self._set_mode("poll", describe_failure(failure))
        await self._poll_safely()
        await asyncio.sleep(self.poll_interval)

    async def _listen(self, conn: asyncpg.Connection) -> None:
        lost = asyncio.Event()

        def on_lost(_conn: object) -> None:
            lost.set()
            self._wake.set()

        conn.add_termination_listener(on_lost)
        await conn.add_listener(CHANNEL, self._on_notify)
        self.listener_pid = conn.get_server_pid()
        await self._poll_safely()  # whatever changed before LISTEN took effect
        self._set_mode("listen", None)
        loop = asyncio.get_running_loop()
        check_at = loop.time() + HEALTH_INTERVAL
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, check_at - loop.time()))
            self._wake.clear()
            if lost.is_set():
                break
            await self._take_baselines()
            if loop.time() < check_at:
                continue  # woken by poke(): no health check due yet
            check_at = loop.time() + HEALTH_INTERVAL
            try:
                now = await asyncio.wait_for(conn.fetchval("SELECT clock_timestamp()"), 2)
            except Exception as exc:
                log.warning("LISTEN connection unhealthy: %s", describe_failure(exc))
                break
            for name in self._watermarks:  # a later catch-up poll starts from here
                self._watermarks[name] = max(self._watermarks[name], now - OVERLAP)
        self._set_mode("poll", "LISTEN connection lost")

    def _set_mode(self, mode: str, reason: str | None) -> None:
        if mode != self.mode:
            log.log(
                logging.INFO if mode == "listen" else logging.WARNING,
                "change feed: %s%s",
                mode,
                f" ({reason})" if reason else "",
            )
            self.mode = mode
            self._broker.publish("feed_status", {"mode": mode, "reason": reason})

    # -- hints -------------------------------------------------------------------------

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            hint = json.loads(payload)
            schema, table, row_id = hint["schema"], hint["table"], str(hint["id"])
        except (ValueError, KeyError, TypeError):
            return
        butler = self._butler_of(schema)
        if butler is None or table not in sources():
            return  # another ecosystem's schema on the same server
        if self._pending_count >= MAX_PENDING:
            self._catch_up = True  # too many at once: a catch-up poll finds the rest
            return
        ids = self._pending.setdefault((butler, table), set())
        if row_id not in ids:
            ids.add(row_id)
            self._pending_count += 1
        if hint.get("op") == "delete":
            ids.add("-" + row_id)
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush())

    def _butler_of(self, schema: str) -> str | None:
        for info in self._butlers().values():
            if info.schema == schema:
                return info.name
        return None

    async def _flush(self) -> None:
        while self._pending:
            pending, self._pending, self._pending_count = self._pending, {}, 0
            await asyncio.gather(
                *(self._reread(b, sources()[t], ids) for (b, t), ids in pending.items())
            )
            if self._catch_up:
                self._catch_up = False
                await self._poll_safely()

    async def _reread(self, butler: str, source: ChangeSource, ids: set[str]) -> None:
        deleted = {i[1:] for i in ids if i.startswith("-")}
        wanted = [uuid.UUID(i) for i in ids if not i.startswith("-")]
        try:
            rows = await self._db.fetch(butler, source.select_by_ids(), wanted)
        except Exception as exc:
            log.warning("re-reading %s of %s failed: %s", source.table, butler, exc)
            self._catch_up = True  # a catch-up poll follows the flush
            return
        found = set()
        for row in rows:
            found.add(str(row[source.id_column]))
            self._emit_all(source.to_event(butler, row))
        for row_id in deleted - found:
            if source.table == "scheduled_tasks":
                self._emit(schedule_deleted(butler, row_id))

    def _emit_all(self, emits: list[Emit]) -> None:
        for emit in emits:
            self._emit(emit)

    def _emit(self, emit: Emit) -> None:
        kind, data, key = emit
        if key in self._seen:
            return
        self._seen[key] = None
        if len(self._seen) > SEEN_LIMIT:
            self._seen.popitem(last=False)
        self._broker.publish(kind, data)

    # -- polling -----------------------------------------------------------------------

    async def _poll_safely(self) -> None:
        try:
            await self.poll()
        except Exception as exc:
            log.warning("catch-up poll failed: %s", describe_failure(exc))

    async def _take_baselines(self) -> None:
        """Poll each butler without a baseline yet (learned of since the last poll, or
        whose first poll failed): while LISTEN works this publishes nothing, it only sets
        what a catch-up poll after a reconnect compares against."""
        new = [info for name, info in self._butlers().items() if name not in self._watermarks]
        if new:
            await asyncio.gather(*(self._poll_butler(info) for info in new))

    async def poll(self) -> None:
        """Publish rows changed since each butler's watermark (first call: just set it)."""
        butlers = self._butlers()
        for gone in set(self._watermarks) - set(butlers):
            self._watermarks.pop(gone, None)
            self._schedules.pop(gone, None)
        await asyncio.gather(*(self._poll_butler(info) for info in butlers.values()))

    async def _poll_butler(self, info: ButlerInfo) -> None:
        try:
            async with asyncio.timeout(self._db.timeout):  # opening the pool too
                pool = await self._db.pool(info.name)
                async with pool.acquire() as conn:
                    now: datetime = await conn.fetchval("SELECT clock_timestamp()")
                    since = self._watermarks.get(info.name)
                    for source in sources().values():
                        if source.module and source.module not in info.modules:
                            continue
                        if source.table == "scheduled_tasks":
                            await self._poll_schedules(info.name, conn, source, since is None)
                        elif since is not None:
                            for row in await conn.fetch(source.select_since(), since):
                                self._emit_all(source.to_event(info.name, row))
        except Exception as exc:
            reason = describe_failure(exc)
            if self._poll_errors.get(info.name) != reason:  # once per distinct failure
                log.warning("poll of %s failed: %s", info.name, reason)
            self._poll_errors[info.name] = reason
            return
        self._poll_errors.pop(info.name, None)
        self._watermarks[info.name] = now - OVERLAP

    async def _poll_schedules(
        self, butler: str, conn: asyncpg.Connection, source: ChangeSource, first: bool
    ) -> None:
        rows = await conn.fetch(source.select_since())
        known = self._schedules.get(butler, {})
        current = {str(r["id"]): r["updated_at"] for r in rows}
        self._schedules[butler] = current
        if first:
            return  # the state when the feed learns of a butler is no change
        for row in rows:
            if known.get(str(row["id"])) != row["updated_at"]:
                self._emit_all(source.to_event(butler, row))
        for gone in set(known) - set(current):
            self._emit(schedule_deleted(butler, gone))
