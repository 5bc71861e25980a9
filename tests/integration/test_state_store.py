"""StateStore against real PostgreSQL: every behaviour of document 002."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from butlers.stores.state import StateStore, StateValueError


@pytest.fixture
def store(butler_schema) -> StateStore:  # type: ignore[no-untyped-def]
    return StateStore(butler_schema.pool)


@pytest.mark.parametrize(
    "value",
    [
        "hello",
        42,
        3.14,
        True,
        False,
        None,
        {},
        [],
        {"a": {"b": [1, 2]}},
        "x" * 10240,
        "你好世界",
        "l1\nl2\ttab",
    ],
)
async def test_values_round_trip_with_their_type(store: StateStore, value: object) -> None:
    await store.set("k", value)
    found, got = await store.get("k")
    assert found
    assert got == value and type(got) is type(value)


async def test_stored_null_differs_from_missing(store: StateStore) -> None:
    await store.set("n", None)
    assert await store.get("n") == (True, None)
    assert await store.get("missing") == (False, None)


async def test_nul_character_is_refused_and_old_value_kept(store: StateStore) -> None:
    await store.set("k", {"ok": 1})
    with pytest.raises(StateValueError, match="NUL"):
        await store.set("k", {"bad": "a\u0000b"})
    assert await store.get("k") == (True, {"ok": 1})


async def test_non_json_value_is_refused(store: StateStore) -> None:
    with pytest.raises(StateValueError, match="not JSON"):
        await store.set("k", {1, 2})


async def test_updated_at_advances(store: StateStore) -> None:
    first = await store.set("k", 1)
    second = await store.set("k", 2)
    assert second > first


async def test_prefix_is_literal(store: StateStore) -> None:
    for key in ("a%b:1", "axb:2", "a_b:3", "ayb:4", "a\\b:5"):
        await store.set(key, 0)
    assert [r.key for r in (await store.list("a%"))[0]] == ["a%b:1"]
    assert [r.key for r in (await store.list("a_"))[0]] == ["a_b:3"]
    assert [r.key for r in (await store.list("a\\"))[0]] == ["a\\b:5"]
    assert len((await store.list(None))[0]) == 5


async def test_delete_reports_whether_the_key_existed(store: StateStore) -> None:
    await store.set("k", 1)
    assert await store.delete("k") is True
    assert await store.delete("k") is False


async def test_concurrent_writers_leave_the_last_value(store: StateStore) -> None:
    """Twenty writers at once: the stored value is the one whose write committed last
    (latest `updated_at`); a write acknowledged but lost to an earlier one fails this."""
    stamps = await asyncio.gather(*(store.set("race", i) for i in range(20)))
    assert len(set(stamps)) == 20
    last = max(range(20), key=lambda i: stamps[i])
    assert await store.get("race") == (True, last)
    [entry] = (await store.list("race"))[0]
    assert entry.updated_at == stamps[last]


@pytest.mark.pool(min_size=2, max_size=4)
async def test_pool_exhaustion_queues_instead_of_failing(
    store: StateStore,
    butler_schema,
    pg_admin_dsn: str,  # type: ignore[no-untyped-def]
) -> None:
    """Three times as many writers as the pool has connections, behind a table lock:
    the pool is full, that many backends wait on the lock, the rest queue on the pool;
    all succeed when the lock goes."""
    pool = butler_schema.pool
    size = 4
    assert (pool.get_min_size(), pool.get_max_size()) == (2, size)  # as the marker asks
    writers = 3 * size
    blocker = await asyncpg.connect(pg_admin_dsn)
    # Outside the blocker's transaction: pg_stat_activity is a per-transaction snapshot.
    watcher = await asyncpg.connect(pg_admin_dsn)

    async def state() -> tuple[int, int, int]:
        waiting = await watcher.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
            butler_schema.credentials.role,
        )
        return pool.get_size(), pool.get_idle_size(), waiting

    try:
        async with blocker.transaction():
            await blocker.execute(f'LOCK TABLE "{butler_schema.schema}".state IN EXCLUSIVE MODE')
            tasks = [asyncio.create_task(store.set(f"k{i}", i)) for i in range(writers)]
            deadline = time.monotonic() + 15
            while (seen := await state()) != (size, 0, size):
                assert time.monotonic() < deadline, f"pool (size, idle, lock waiters): {seen}"
                await asyncio.sleep(0.02)
            assert not any(t.done() for t in tasks)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        await blocker.close()
        await watcher.close()
    assert pool.get_size() <= size
    assert len((await store.list("k", limit=1000))[0]) == writers


async def test_pages_continue_after_the_last_key_and_stop_at_the_limit(store: StateStore) -> None:
    for i in range(7):
        await store.set(f"p:{i}", i)
    await store.set("q:0", 0)
    first, more = await store.list("p:", limit=3)
    assert [r.key for r in first] == ["p:0", "p:1", "p:2"] and more
    rest, more = await store.list("p:", after="p:2", limit=10)
    assert [r.key for r in rest] == ["p:3", "p:4", "p:5", "p:6"] and not more


async def test_a_page_stops_at_its_byte_budget_but_holds_at_least_one_entry(
    store: StateStore,
) -> None:
    for i in range(4):
        await store.set(f"b:{i}", "z" * 1000)
    page, more = await store.list("b:", limit=100, budget=2500)
    assert [r.key for r in page] == ["b:0", "b:1", "b:2"] and more
    one, more = await store.list("b:", limit=100, budget=10)
    assert [r.key for r in one] == ["b:0"] and more


async def test_a_value_over_one_mib_is_refused(store: StateStore) -> None:
    with pytest.raises(StateValueError, match="the limit is 1048576 bytes"):
        await store.set("k", "v" * (1024 * 1024))
    assert await store.get("k") == (False, None)
