"""The switchboard's own defences, in process: ingest keys scoped to the caller, the
registry's own-name rule as seen by the tools, and stale entries expiring."""

from __future__ import annotations

import asyncio
import time

from butlers.auth.identity import butler, user
from butlers.llm.toolbox import speaking_as
from butlers.switchboard.envelope import build_envelope

from .conftest import ButlerFactory

SWITCHBOARD = {"switchboard": {}}


def _envelope(text: str, **options: str) -> dict[str, object]:
    envelope = build_envelope(text, channel="telegram", provider="telegram", **options)
    return {"envelope": envelope.model_dump(mode="json")}


async def test_another_caller_cannot_pre_empt_a_key(module_butler: ButlerFactory) -> None:
    """Keys are scoped to the authenticated caller: bob's message with alice's key (or
    with the event id alice's connector will derive a key from) does not swallow hers."""
    switchboard = await module_butler(SWITCHBOARD)
    for options in ({"idempotency_key": "k-1"}, {"event_id": "update-7", "sender": "alice"}):
        with speaking_as(user("bob")):
            first = await switchboard.call("ingest_v1", _envelope("bob got here first", **options))
        with speaking_as(user("alice")):
            mine = await switchboard.call("ingest_v1", _envelope("alice's message", **options))
        assert (first["duplicate"], mine["duplicate"]) == (False, False)
        assert first["request_id"] != mine["request_id"]
    rows = await switchboard.context.pool.fetch(
        "SELECT submitted_by, text FROM message_inbox WHERE idempotency_key = 'k-1' "
        "ORDER BY submitted_by"
    )
    assert [tuple(r) for r in rows] == [
        ("user:alice", "alice's message"),
        ("user:bob", "bob got here first"),
    ]


async def test_a_repeat_with_the_same_content_is_a_duplicate_and_other_content_a_conflict(
    module_butler: ButlerFactory,
) -> None:
    switchboard = await module_butler(SWITCHBOARD)
    first = await switchboard.call("ingest_v1", _envelope("pay rent", idempotency_key="k-2"))
    again = await switchboard.call("ingest_v1", _envelope("pay rent", idempotency_key="k-2"))
    assert again == {"status": "accepted", "request_id": first["request_id"], "duplicate": True}
    other = await switchboard.call_raw("ingest_v1", _envelope("pay me", idempotency_key="k-2"))
    assert other.is_error and "conflict" in other.content[0].text


async def test_the_tools_refuse_a_butler_registering_another_name(
    module_butler: ButlerFactory,
) -> None:
    switchboard = await module_butler(SWITCHBOARD)
    entry = {"description": "d", "url": "http://127.0.0.1:9/mcp"}
    with speaking_as(butler("general")):
        own = await switchboard.call_raw("butler_register", {"name": "general", **entry})
        other = await switchboard.call_raw("butler_register", {"name": "health", **entry})
    with speaking_as(user()):
        by_user = await switchboard.call_raw("butler_register", {"name": "health", **entry})
    assert not own.is_error
    assert other.is_error and "only for itself" in other.content[0].text
    assert by_user.is_error
    names = [r["name"] for r in await switchboard.call("butler_registry_list")]
    assert names == ["general"]


async def test_entries_whose_heartbeat_stopped_expire(module_butler: ButlerFactory) -> None:
    switchboard = await module_butler({"switchboard": {"registryExpirySeconds": 1}})
    entry = {"description": "d", "url": "http://127.0.0.1:9/mcp"}
    await switchboard.call("butler_register", {"name": "ghost", **entry})
    await switchboard.call("butler_register", {"name": "alive", **entry})
    deadline = time.monotonic() + 15
    while True:
        await switchboard.call("butler_heartbeat", {"name": "alive"})
        names = {r["name"] for r in await switchboard.call("butler_registry_list")}
        if names == {"alive"}:
            break
        assert "alive" in names
        assert time.monotonic() < deadline, f"ghost never expired: {names}"
        await asyncio.sleep(0.2)
