"""The change feed on real PostgreSQL: hints become events once each, also past a burst
larger than the hint buffer and while the LISTEN connection is down."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from butlers import migrations
from butlers.dashboard import feed as feed_module
from butlers.dashboard.db import DatabaseManager
from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.errors import DatabaseUnavailable
from butlers.dashboard.events import EventBroker
from butlers.dashboard.feed import LISTEN_APPLICATION, ChangeFeed
from butlers.db.provision import Credentials, deprovision, provision
from butlers.db.readers import dashboard_role, dashboard_schema
from tests.support.dashboard import StaticDirectory


@dataclass
class Running:
    reader: Credentials
    butler: Credentials
    directory: StaticDirectory
    feed: ChangeFeed
    broker: EventBroker

    @property
    def info(self) -> ButlerInfo:
        return ButlerInfo("b", "http://127.0.0.1:1/mcp", self.butler.schema)


@contextlib.asynccontextmanager
async def running_feed(
    pg_admin_dsn: str, session_tag: str, *, known: bool
) -> AsyncIterator[Running]:
    """A feed LISTENing over one butler's schema; `known`: the butler is in its directory
    from the start (otherwise the test adds it, as discovery would)."""
    prefix = f"{session_tag}feed_"
    reader = await provision(pg_admin_dsn, dashboard_schema(prefix), role=dashboard_role(prefix))
    butler = await provision(pg_admin_dsn, f"{prefix}b")
    await migrations.upgrade(
        butler.dsn(pg_admin_dsn), butler.schema, [migrations.CORE], reader_role=reader.role
    )
    directory = StaticDirectory([])
    db = DatabaseManager(reader.dsn(pg_admin_dsn))
    db.add_butler("b", butler.schema)
    broker = EventBroker()
    feed = ChangeFeed(reader.dsn(pg_admin_dsn), db, directory.butlers, broker, poll_interval=0.1)
    running = Running(reader, butler, directory, feed, broker)
    if known:
        directory.set([running.info])
    task = asyncio.create_task(feed.run())
    try:
        await wait_until(lambda: feed.mode == "listen")
        yield running
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await db.close()
        await deprovision(pg_admin_dsn, butler.schema)
        await deprovision(pg_admin_dsn, reader.schema, role=reader.role)


@pytest.fixture
async def setup(
    pg_admin_dsn: str, session_tag: str
) -> AsyncIterator[tuple[Credentials, Credentials, ChangeFeed, EventBroker]]:
    async with running_feed(pg_admin_dsn, session_tag, known=True) as r:
        yield r.reader, r.butler, r.feed, r.broker


async def wait_until(check: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} not met in {timeout} s"
        await asyncio.sleep(0.02)


async def terminate_listen(pg_admin_dsn: str, reader: Credentials) -> None:
    admin = await asyncpg.connect(pg_admin_dsn)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = $1 AND usename = $2",
            LISTEN_APPLICATION,
            reader.role,
        )
    finally:
        await admin.close()


def published(broker: EventBroker, kind: str, field: str = "session_id") -> list[str]:
    _sub, replay, _resync = broker.subscribe(str(broker._next_id - 10_000))  # everything kept
    broker.unsubscribe(_sub)
    return [str(e.data[field]) for e in replay if e.type == kind]


async def insert_sessions(dsn: str, count: int) -> list[str]:
    conn = await asyncpg.connect(dsn)
    ids = [uuid.uuid4() for _ in range(count)]
    try:
        async with conn.transaction():
            for session_id in ids:
                await conn.execute(
                    "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, "
                    "status) VALUES ($1, 'b', 't', 'p', 'running')",
                    session_id,
                )
    finally:
        await conn.close()
    return [str(i) for i in ids]


async def test_each_session_start_is_published_once(
    pg_admin_dsn: str, setup: tuple[Credentials, Credentials, ChangeFeed, EventBroker]
) -> None:
    _reader, butler, _feed, broker = setup
    ids = await insert_sessions(butler.dsn(pg_admin_dsn), 3)
    await wait_until(lambda: set(ids) <= set(published(broker, "session_start")))
    await asyncio.sleep(0.3)
    assert sorted(published(broker, "session_start")) == sorted(ids)


async def test_a_burst_past_the_hint_buffer_is_caught_up(
    pg_admin_dsn: str,
    setup: tuple[Credentials, Credentials, ChangeFeed, EventBroker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _reader, butler, _feed, broker = setup
    monkeypatch.setattr(feed_module, "MAX_PENDING", 5)
    ids = await insert_sessions(butler.dsn(pg_admin_dsn), 40)
    await wait_until(lambda: set(ids) <= set(published(broker, "session_start")))
    assert len(published(broker, "session_start")) == 40


async def test_without_listen_the_feed_polls_and_then_listens_again(
    pg_admin_dsn: str, setup: tuple[Credentials, Credentials, ChangeFeed, EventBroker]
) -> None:
    reader, butler, feed, broker = setup
    admin = await asyncpg.connect(pg_admin_dsn)
    try:
        # The pool's one connection stays; a new LISTEN connection is refused.
        await admin.execute(f'ALTER ROLE "{reader.role}" CONNECTION LIMIT 1')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = $1 AND usename = $2",
            LISTEN_APPLICATION,
            reader.role,
        )
        await wait_until(lambda: feed.mode == "poll")
        ids = await insert_sessions(butler.dsn(pg_admin_dsn), 2)
        await wait_until(lambda: set(ids) <= set(published(broker, "session_start")))
        assert feed.mode == "poll", "these came by polling"
        await admin.execute(f'ALTER ROLE "{reader.role}" CONNECTION LIMIT -1')
        await wait_until(lambda: feed.mode == "listen")
        more = await insert_sessions(butler.dsn(pg_admin_dsn), 1)
        await wait_until(lambda: set(more) <= set(published(broker, "session_start")))
    finally:
        await admin.execute(f'ALTER ROLE "{reader.role}" CONNECTION LIMIT -1')
        await admin.close()
    assert len(published(broker, "session_start")) == 3


async def test_a_butler_learned_of_later_misses_nothing_while_listen_is_down(
    pg_admin_dsn: str, session_tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed started before it knew the butler (a dashboard that starts before the
    ecosystem's butlers are registered): what changes between the loss of the LISTEN
    connection and the new one is still published, by the catch-up poll."""
    async with running_feed(pg_admin_dsn, session_tag, known=False) as r:
        r.directory.set([r.info])
        r.feed.poke()  # as discovery does
        await wait_until(
            lambda: "b" in r.feed._watermarks, 5, "a baseline of the butler learned of"
        )
        dsn = r.butler.dsn(pg_admin_dsn)
        changed: list[str] = []
        listen = r.feed._listen

        async def listen_after_changes(conn: asyncpg.Connection) -> None:
            monkeypatch.setattr(r.feed, "_listen", listen)  # this reconnect only
            # Committed while no connection LISTENs: their hints reach no one.
            changed.extend(await insert_sessions(dsn, 1))
            writer = await asyncpg.connect(dsn)
            try:
                changed.append(
                    str(
                        await writer.fetchval(
                            "INSERT INTO scheduled_tasks (name, cron, prompt) "
                            "VALUES ('while-down', '0 4 * * *', 'x') RETURNING id"
                        )
                    )
                )
            finally:
                await writer.close()
            await listen(conn)

        monkeypatch.setattr(r.feed, "_listen", listen_after_changes)
        await terminate_listen(pg_admin_dsn, r.reader)
        await wait_until(lambda: len(changed) == 2 and r.feed.mode == "listen")
        session_id, schedule_id = changed
        await wait_until(
            lambda: (
                session_id in published(r.broker, "session_start")
                and schedule_id in published(r.broker, "schedule_changed", "id")
            ),
            5,
            "the events of what changed while LISTEN was down",
        )


async def test_a_listen_connection_lost_while_being_set_up_is_replaced(
    pg_admin_dsn: str,
    setup: tuple[Credentials, Credentials, ChangeFeed, EventBroker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader, butler, feed, broker = setup
    listen = feed._listen

    async def lost_before_listen(conn: asyncpg.Connection) -> None:
        monkeypatch.setattr(feed, "_listen", listen)  # this reconnect only
        await conn.close()  # as if terminated before LISTEN was sent
        await listen(conn)

    monkeypatch.setattr(feed, "_listen", lost_before_listen)
    await terminate_listen(pg_admin_dsn, reader)
    await wait_until(lambda: feed.reconnects >= 2 and feed.mode == "listen", 5, "LISTEN again")
    ids = await insert_sessions(butler.dsn(pg_admin_dsn), 1)
    await wait_until(lambda: set(ids) <= set(published(broker, "session_start")), 5, "the event")


async def test_a_failed_re_read_is_caught_up_by_a_poll(
    pg_admin_dsn: str,
    setup: tuple[Credentials, Credentials, ChangeFeed, EventBroker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _reader, butler, feed, broker = setup
    db = feed._db
    fetch = db.fetch

    async def fails_once(name: str, sql: str, *args: Any) -> list[asyncpg.Record]:
        monkeypatch.setattr(db, "fetch", fetch)
        raise DatabaseUnavailable(f"cannot read the schema of butler {name!r}: timed out")

    monkeypatch.setattr(db, "fetch", fails_once)
    ids = await insert_sessions(butler.dsn(pg_admin_dsn), 1)
    await wait_until(lambda: set(ids) <= set(published(broker, "session_start")), 5, "the event")
    assert feed.mode == "listen"
