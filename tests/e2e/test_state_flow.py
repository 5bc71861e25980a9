"""The state store end to end over real MCP clients (document 002)."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import httpx2 as httpx
import pytest
from fastmcp.exceptions import ToolError

from tests.support.raw_mcp import RawMcpSession

from .harness.ecosystem import EcosystemHandle

FIDELITY_CASES = {
    "string": "hello",
    "integer": 42,
    "float": 3.14,
    "boolean": True,
    "null_value": None,
    "empty_object": {},
    "empty_array": [],
    "nested": {"a": {"b": [1, 2, 3]}},
    "large_string": "x" * 10_240,
    "unicode": "你好世界",
    "special_chars": 'line1\nline2\ttab "quoted" \\ back',
}


async def _listing(
    handle: EcosystemHandle, butler: str, arguments: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every entry `state_list` lists, page after page (opt-in paging)."""
    entries: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await handle.call(
            butler,
            "state_list",
            arguments | {"limit": 100} | ({"cursor": cursor} if cursor else {}),
        )
        entries += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return entries


# -- cross-session persistence ---------------------------------------------------


async def test_state_persists_across_sessions(butler_ecosystem: EcosystemHandle) -> None:
    async with butler_ecosystem.client("health") as client:
        await client.call_tool(
            "state_set", {"key": "e2e-persist", "value": {"weight_goal": 75, "unit": "kg"}}
        )
    async with butler_ecosystem.client("health") as client:
        result = await client.call_tool("state_get", {"key": "e2e-persist"})
    assert result.data == {"weight_goal": 75, "unit": "kg"}


async def test_written_key_appears_in_listing(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-listed", "value": 1})
    listing = await _listing(butler_ecosystem, "health", {"prefix": "e2e-listed"})
    assert [entry["key"] for entry in listing] == ["e2e-listed"]
    assert listing[0]["value"] == 1


async def test_state_list_answers_the_seed_shape(butler_ecosystem: EcosystemHandle) -> None:
    """Document 002: an array of `{key, value, updated_at}`, prefix matched literally."""
    for key in ("e2e-seed:a", "e2e-seed:b", "e2e-seedling"):
        await butler_ecosystem.call("health", "state_set", {"key": key, "value": {"k": key}})
    listed = await butler_ecosystem.call("health", "state_list", {"prefix": "e2e-seed:"})
    assert isinstance(listed, list)
    assert [sorted(entry) for entry in listed] == [["key", "updated_at", "value"]] * 2
    assert [(e["key"], e["value"]) for e in listed] == [
        ("e2e-seed:a", {"k": "e2e-seed:a"}),
        ("e2e-seed:b", {"k": "e2e-seed:b"}),
    ]
    datetime.fromisoformat(listed[0]["updated_at"])
    assert await butler_ecosystem.call("health", "state_list", {"prefix": "e2e-none:"}) == []


async def test_deleted_key_reads_back_as_null(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-deleted", "value": "x"})
    deleted = await butler_ecosystem.call("health", "state_delete", {"key": "e2e-deleted"})
    assert deleted == {"key": "e2e-deleted", "deleted": True}
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-deleted"}) is None
    again = await butler_ecosystem.call("health", "state_delete", {"key": "e2e-deleted"})
    assert again["deleted"] is False


async def test_overwrite_replaces_the_value(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-over", "value": "A"})
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-over", "value": "B"})
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-over"}) == "B"


async def test_updated_at_advances_on_overwrite(butler_ecosystem: EcosystemHandle) -> None:
    first = await butler_ecosystem.call("health", "state_set", {"key": "e2e-ts", "value": 1})
    second = await butler_ecosystem.call("health", "state_set", {"key": "e2e-ts", "value": 2})
    assert datetime.fromisoformat(second["updated_at"]) > datetime.fromisoformat(
        first["updated_at"]
    )
    [entry] = await _listing(butler_ecosystem, "health", {"prefix": "e2e-ts"})
    assert datetime.fromisoformat(entry["updated_at"]) > datetime.fromisoformat(entry["created_at"])


# -- JSONB fidelity ----------------------------------------------------------------


@pytest.mark.parametrize("type_name", list(FIDELITY_CASES))
async def test_jsonb_type_fidelity(butler_ecosystem: EcosystemHandle, type_name: str) -> None:
    value = FIDELITY_CASES[type_name]
    key = f"e2e-fidelity-{type_name}"
    await butler_ecosystem.call("health", "state_set", {"key": key, "value": value})
    got = await butler_ecosystem.call("health", "state_get", {"key": key})
    assert got == value
    assert type(got) is type(value), f"{type_name}: {type(got).__name__} != {type(value).__name__}"


async def test_stored_null_is_distinct_from_missing_key(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-null:stored", "value": None})
    listing = await _listing(butler_ecosystem, "health", {"prefix": "e2e-null:"})
    assert listing == [
        {
            "key": "e2e-null:stored",
            "value": None,
            "created_at": listing[0]["created_at"],
            "updated_at": listing[0]["updated_at"],
        }
    ]
    pool = await butler_ecosystem.pool("health")
    raw = await pool.fetchval("SELECT jsonb_typeof(value) FROM state WHERE key = 'e2e-null:stored'")
    assert raw == "null"
    assert await pool.fetchval("SELECT count(*) FROM state WHERE key = 'e2e-null:missing'") == 0


BIG = "123456789012345678901234567890"  # 30 digits: past 64 bits, and past a double


@pytest.mark.parametrize("path", ["direct", "sdk"])
async def test_an_integer_of_any_size_round_trips_exactly(
    butler_ecosystem: EcosystemHandle, path: str
) -> None:
    """JSONB numbers have arbitrary precision: a 30-digit integer (and a negative one of
    25) comes back unchanged over MCP, on the butler's direct path and on the SDK's (a
    progress token sends the call there), and is stored as written."""
    meta = {"progressToken": "p-1"} if path == "sdk" else None
    key = f"e2e-bigint-{path}"
    headers = {"Authorization": f"Bearer {butler_ecosystem.token}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:
        session = RawMcpSession(butler_ecosystem["general"].url, client)
        await session.open()
        value = f'{{"n": {BIG}, "m": [-{BIG[:25]}, 1]}}'
        stored = await session.call_tool("state_set", f'{{"key": "{key}", "value": {value}}}', meta)
        assert not stored["result"].get("isError"), stored
        read = await session.call_tool("state_get", f'{{"key": "{key}"}}', meta)
    result = read["result"]
    assert result["structuredContent"] == {"result": {"n": int(BIG), "m": [-int(BIG[:25]), 1]}}
    assert json.loads(result["content"][0]["text"]) == {"n": int(BIG), "m": [-int(BIG[:25]), 1]}
    pool = await butler_ecosystem.pool("general")
    text = await pool.fetchval("SELECT value->>'n' FROM state WHERE key = $1", key)
    assert text == BIG


async def test_integers_stay_integers_in_the_database(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-int", "value": 42})
    pool = await butler_ecosystem.pool("health")
    assert await pool.fetchval("SELECT value::text FROM state WHERE key = 'e2e-int'") == "42"


async def test_value_postgres_cannot_store_is_a_clear_error_and_keeps_old_value(
    butler_ecosystem: EcosystemHandle,
) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-nul", "value": "safe"})
    with pytest.raises(ToolError, match=r"NUL|\\u0000"):
        await butler_ecosystem.call("health", "state_set", {"key": "e2e-nul", "value": "a\u0000b"})
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-nul"}) == "safe"


# -- isolation between butlers -------------------------------------------------------


async def test_state_isolation_between_butlers(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call(
        "health", "state_set", {"key": "prefs", "value": {"source": "health"}}
    )
    await butler_ecosystem.call(
        "relationship", "state_set", {"key": "prefs", "value": {"source": "relationship"}}
    )
    assert (await butler_ecosystem.call("health", "state_get", {"key": "prefs"}))[
        "source"
    ] == "health"
    assert (await butler_ecosystem.call("relationship", "state_get", {"key": "prefs"}))[
        "source"
    ] == "relationship"


async def test_butler_cannot_read_another_butlers_keys(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("relationship", "state_set", {"key": "e2e-only-rel", "value": 1})
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-only-rel"}) is None
    assert await _listing(butler_ecosystem, "health", {"prefix": "e2e-only-rel"}) == []


async def test_delete_is_scoped_to_one_butler(butler_ecosystem: EcosystemHandle) -> None:
    for name in ("health", "relationship"):
        await butler_ecosystem.call(name, "state_set", {"key": "e2e-scoped", "value": name})
    await butler_ecosystem.call("health", "state_delete", {"key": "e2e-scoped"})
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-scoped"}) is None
    assert (
        await butler_ecosystem.call("relationship", "state_get", {"key": "e2e-scoped"})
        == "relationship"
    )


# -- prefix listing --------------------------------------------------------------------


async def test_prefix_filter_returns_only_matching_keys(butler_ecosystem: EcosystemHandle) -> None:
    for key in ("pfx:prefs", "pfx:goals", "pfx:history", "other:prefs"):
        await butler_ecosystem.call("general", "state_set", {"key": key, "value": key})
    listing = await _listing(butler_ecosystem, "general", {"prefix": "pfx:"})
    assert [entry["key"] for entry in listing] == ["pfx:goals", "pfx:history", "pfx:prefs"]


async def test_empty_prefix_lists_all_keys(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("messenger", "state_set", {"key": "all-a", "value": 1})
    await butler_ecosystem.call("messenger", "state_set", {"key": "all-b", "value": 2})
    keys = {entry["key"] for entry in await _listing(butler_ecosystem, "messenger", {})}
    assert {"all-a", "all-b"} <= keys
    keys_empty = {e["key"] for e in await _listing(butler_ecosystem, "messenger", {"prefix": ""})}
    assert keys == keys_empty


async def test_prefix_without_match_lists_nothing(butler_ecosystem: EcosystemHandle) -> None:
    assert await _listing(butler_ecosystem, "general", {"prefix": "no-such-prefix:"}) == []


async def test_prefix_is_literal_not_a_wildcard(butler_ecosystem: EcosystemHandle) -> None:
    for key in ("healthcare:x", "health:y", "h%lth:z", "h_alth:w", "hXalth:v"):
        await butler_ecosystem.call("switchboard", "state_set", {"key": key, "value": 0})
    assert [
        e["key"] for e in await _listing(butler_ecosystem, "switchboard", {"prefix": "health:"})
    ] == ["health:y"]
    assert [
        e["key"] for e in await _listing(butler_ecosystem, "switchboard", {"prefix": "h%"})
    ] == ["h%lth:z"]
    assert [
        e["key"] for e in await _listing(butler_ecosystem, "switchboard", {"prefix": "h_"})
    ] == ["h_alth:w"]


# -- concurrency ---------------------------------------------------------------------------


async def test_concurrent_state_writes_last_writer_wins(butler_ecosystem: EcosystemHandle) -> None:
    """Ten writers at once, each over its own client: the stored value is the one written
    last (the write that answered the latest `updated_at`), so no acknowledged write is
    lost to an earlier one, and the key has one row."""

    async def write(value: int) -> tuple[datetime, int]:
        async with butler_ecosystem.client("health") as client:
            result = await client.call_tool(
                "state_set", {"key": "concurrent-test", "value": {"counter": value}}
            )
        return datetime.fromisoformat(result.data["updated_at"]), value

    writes = sorted(await asyncio.gather(*(write(i) for i in range(10))))
    assert len({at for at, _ in writes}) == 10, "two writes claim the same instant"
    last_at, last_value = writes[-1]
    result = await butler_ecosystem.call("health", "state_get", {"key": "concurrent-test"})
    assert result == {"counter": last_value}
    pool = await butler_ecosystem.pool("health")
    row = await pool.fetchrow(
        "SELECT count(*) OVER (), updated_at FROM state WHERE key = $1", "concurrent-test"
    )
    assert (row["count"], row["updated_at"]) == (1, last_at)


async def test_concurrent_reads_return_the_same_value(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-reads", "value": [1, 2, 3]})
    results = await asyncio.gather(
        *(butler_ecosystem.call("health", "state_get", {"key": "e2e-reads"}) for _ in range(10))
    )
    assert all(r == [1, 2, 3] for r in results)


OLD_VALUE = {"version": "old", "items": list(range(200))}
NEW_VALUE = {"version": "new", "items": list(range(200, 400))}


async def test_read_during_write_sees_old_or_new_value(butler_ecosystem: EcosystemHandle) -> None:
    """Reads racing a write see the whole old value or the whole new one (never a mix),
    and the write takes effect: a read after it sees the new value."""
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-rw", "value": OLD_VALUE})
    written, *reads = await asyncio.gather(
        butler_ecosystem.call("health", "state_set", {"key": "e2e-rw", "value": NEW_VALUE}),
        *(butler_ecosystem.call("health", "state_get", {"key": "e2e-rw"}) for _ in range(5)),
    )
    assert all(value in (OLD_VALUE, NEW_VALUE) for value in reads), reads
    assert written["key"] == "e2e-rw"
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-rw"}) == NEW_VALUE


async def test_delete_during_read_sees_value_or_null(butler_ecosystem: EcosystemHandle) -> None:
    """Reads racing a delete see the value or null, and the delete takes effect."""
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-dr", "value": "v"})
    deleted, *reads = await asyncio.gather(
        butler_ecosystem.call("health", "state_delete", {"key": "e2e-dr"}),
        *(butler_ecosystem.call("health", "state_get", {"key": "e2e-dr"}) for _ in range(5)),
    )
    assert all(value in ("v", None) for value in reads), reads
    assert deleted == {"key": "e2e-dr", "deleted": True}
    assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-dr"}) is None
    pool = await butler_ecosystem.pool("health")
    assert await pool.fetchval("SELECT count(*) FROM state WHERE key = 'e2e-dr'") == 0


async def test_state_results_are_json_not_text(butler_ecosystem: EcosystemHandle) -> None:
    result = await butler_ecosystem.call_raw(
        "health", "state_set", {"key": "e2e-json", "value": {"a": 1}}
    )
    got = await butler_ecosystem.call_raw("health", "state_get", {"key": "e2e-json"})
    assert not result.is_error
    assert got.structured_content == {"result": {"a": 1}}
    assert json.loads(got.content[0].text) == {"a": 1}


# -- bounded work ------------------------------------------------------------------------


async def test_a_huge_listing_comes_in_bounded_pages(butler_ecosystem: EcosystemHandle) -> None:
    big = "x" * 200_000
    keys = [f"e2e-big:{i:02d}" for i in range(24)]  # about 4.8 MB of values
    for key in keys:
        await butler_ecosystem.call("general", "state_set", {"key": key, "value": big})
    with pytest.raises(ToolError, match="list a narrower prefix, or page: pass limit"):
        await butler_ecosystem.call("general", "state_list", {"prefix": "e2e-big:"})
    first = await butler_ecosystem.call(
        "general", "state_list", {"prefix": "e2e-big:", "limit": 1000}
    )
    assert first["next_cursor"] is not None
    assert len(json.dumps(first)) < 1_300_000, "a page is about 1 MiB at most"
    entries = await _listing(butler_ecosystem, "general", {"prefix": "e2e-big:"})
    assert [e["key"] for e in entries] == keys
    assert all(e["value"] == big for e in entries)
    small = await butler_ecosystem.call("general", "state_list", {"prefix": "e2e-big:", "limit": 2})
    assert [e["key"] for e in small["items"]] == keys[:2]


async def test_a_value_over_the_size_limit_is_refused_and_the_old_value_kept(
    butler_ecosystem: EcosystemHandle,
) -> None:
    await butler_ecosystem.call("general", "state_set", {"key": "e2e-huge", "value": "small"})
    with pytest.raises(ToolError, match="bytes of JSON; the limit is 1048576 bytes"):
        await butler_ecosystem.call(
            "general", "state_set", {"key": "e2e-huge", "value": "y" * 1_100_000}
        )
    assert await butler_ecosystem.call("general", "state_get", {"key": "e2e-huge"}) == "small"


async def test_a_key_too_long_in_bytes_is_refused_with_a_clear_error(
    butler_ecosystem: EcosystemHandle,
) -> None:
    key = "\U0001d11e" * 1024  # 1024 characters, 4096 bytes of UTF-8
    with pytest.raises(ToolError, match="key is 4096 bytes of UTF-8; the limit is 1024 bytes"):
        await butler_ecosystem.call("general", "state_set", {"key": key, "value": 1})


async def test_a_cursor_the_list_did_not_return_is_refused(
    butler_ecosystem: EcosystemHandle,
) -> None:
    with pytest.raises(ToolError, match="cursor is not a next_cursor this list returned"):
        await butler_ecosystem.call("general", "state_list", {"cursor": "bm90LWEtY3Vyc29y"})
