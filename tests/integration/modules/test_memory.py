"""The memory module's tools against PostgreSQL, with the real embedding model."""

from pathlib import Path

import pytest

from .conftest import ButlerFactory

pytest.importorskip("numpy")
# Building a butler loads the model (about a second alone; more on a shared machine).
pytestmark = pytest.mark.timeout(300)


async def test_a_paraphrased_question_finds_the_fact(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    await butler.call(
        "memory_store_fact",
        {
            "subject": "owner",
            "predicate": "allergic_to",
            "content": "penicillin",
            "permanence": "permanent",
            "tags": ["health"],
        },
    )
    await butler.call(
        "memory_store_fact",
        {"subject": "owner", "predicate": "favourite_food", "content": "mushroom risotto"},
    )
    await butler.call("memory_store_rule", {"content": "Confirm before emailing a new recipient."})
    [first, *_] = await butler.call("memory_search", {"query": "which antibiotics can't I take?"})
    assert first["type"] == "fact" and "penicillin" in first["text"]
    assert first["provenance"] == "owner" and first["score"] > 0
    rules = await butler.call("memory_search", {"query": "sending mail", "types": ["rule"]})
    assert [hit["type"] for hit in rules] == ["rule"]


async def test_a_new_fact_supersedes_and_the_old_stays_as_history(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"memory": {}})
    old = await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "lives_in", "content": "Basel"}
    )
    new = await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "lives in", "content": "Zurich"}
    )
    assert new["supersedes"] == old["id"]
    hits = await butler.call("memory_search", {"query": "where does the owner live"})
    texts = [hit["text"] for hit in hits]
    assert any("Zurich" in text for text in texts)
    assert not any("Basel" in text for text in texts)
    history = await butler.call("memory_history", {"id": new["id"]})
    assert [(f["content"], f["validity"]) for f in history] == [
        ("Zurich", "active"),
        ("Basel", "superseded"),
    ]
    assert history[1]["superseded_by"] == new["id"]
    # The same content again confirms the active fact instead of adding one.
    again = await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "lives_in", "content": "Zurich"}
    )
    assert again["id"] == new["id"]


async def test_retract_hides_a_fact_and_restore_brings_it_back(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"memory": {}})
    fact = await butler.call(
        "memory_store_fact", {"subject": "garage", "predicate": "door_code", "content": "4711"}
    )
    query = {"query": "garage door code"}
    assert [hit["id"] for hit in await butler.call("memory_search", query)] == [fact["id"]]
    retracted = await butler.call("memory_retract", {"id": fact["id"]})
    assert retracted["validity"] == "retracted"
    assert await butler.call("memory_search", query) == []
    again = await butler.call_raw("memory_retract", {"id": fact["id"]})
    assert again.is_error and "is retracted, not active" in again.content[0].text
    await butler.call("memory_restore", {"id": fact["id"]})
    assert [hit["id"] for hit in await butler.call("memory_search", query)] == [fact["id"]]
    stats = await butler.call("memory_stats", {})
    assert stats["facts"] == {"active": 1} and stats["vector_search"] == "exact"


async def test_untrusted_content_ranks_below_the_owners_word(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    await butler.call(
        "memory_store_fact",
        {
            "subject": "bank",
            "predicate": "account_for_rent",
            "content": "IBAN CH93 0000 1111",
            "source": "untrusted",
        },
    )
    await butler.call(
        "memory_store_fact",
        {
            "subject": "landlord",
            "predicate": "bank_account_for_rent",
            "content": "IBAN CH56 2222 3333",
        },
    )
    hits = await butler.call("memory_search", {"query": "bank account for rent"})
    assert [hit["provenance"] for hit in hits] == ["owner", "untrusted"]


async def test_rule_feedback_moves_its_standing(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    rule = await butler.call("memory_store_rule", {"content": "Summarise long emails first."})
    await butler.call("memory_feedback", {"id": rule["id"], "outcome": "helpful"})
    rated = await butler.call("memory_feedback", {"id": rule["id"], "outcome": "harmful"})
    assert (rated["helpful"], rated["harmful"]) == (1, 1)
    missing = await butler.call_raw(
        "memory_feedback", {"id": "00000000-0000-0000-0000-000000000000", "outcome": "helpful"}
    )
    assert missing.is_error and "no fact or rule" in missing.content[0].text


async def test_delete_is_for_good_and_hidden_from_sessions(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    rule = await butler.call("memory_store_rule", {"content": "Water the tomatoes at dusk."})
    assert await butler.call("memory_delete", {"id": rule["id"]}) == {"deleted": rule["id"]}
    assert await butler.call("memory_search", {"query": "tomatoes"}) == []
    from butlers.modules.memory.module import MemoryModule

    assert "memory_delete" in MemoryModule.session_hidden_tools


def test_a_session_can_neither_share_nor_start_consolidation() -> None:
    from butlers.modules.memory.module import MemoryModule

    owners_only = {"memory_share", "memory_receive_shared", "memory_withdraw_shared"}
    assert owners_only | {"memory_consolidate_now"} <= set(MemoryModule.session_hidden_tools)


async def test_a_copy_is_never_shared_on_and_never_supersedes(
    module_butler: ButlerFactory,
) -> None:
    import uuid

    butler = await module_butler({"memory": {}})
    me = butler.context.name
    origin = str(uuid.uuid4())
    copy = await butler.call(
        "memory_receive_shared",
        {
            "origin": "relationship",
            "origin_id": origin,
            "subject": "Anna",
            "predicate": "birthday",
            "content": "3 March",
        },
    )
    assert (copy["shared_from"], copy["shared_id"]) == ("relationship", origin)
    refused = await butler.call_raw("memory_share", {"id": copy["id"], "butlers": ["general"]})
    assert refused.is_error and "shared with this butler by relationship" in str(refused.content)
    own = await butler.call(
        "memory_store_fact", {"subject": "Anna", "predicate": "birthday", "content": "4 March"}
    )
    assert own["supersedes"] is None
    itself = await butler.call_raw("memory_share", {"id": own["id"], "butlers": [me]})
    assert itself.is_error and "name only other butlers" in str(itself.content)
    shared = await butler.call("memory_share", {"id": own["id"], "butlers": ["general"]})
    assert shared["shared_with"] == ["general"]
    # Shared again (refreshed), then withdrawn: one copy at most, then none.
    await butler.call(
        "memory_receive_shared",
        {
            "origin": "relationship",
            "origin_id": origin,
            "subject": "Anna",
            "predicate": "birthday",
            "content": "the 3rd of March",
        },
    )
    hits = await butler.call("memory_search", {"query": "When is Anna's birthday?"})
    assert sorted(h["text"] for h in hits) == [
        "Anna · birthday · 4 March",
        "Anna · birthday · the 3rd of March",
    ]
    withdrawn = {"origin": "relationship", "origin_id": origin}
    assert await butler.call("memory_withdraw_shared", withdrawn) == {"withdrawn": True}
    hits = await butler.call("memory_search", {"query": "When is Anna's birthday?"})
    assert [h["text"] for h in hits] == ["Anna · birthday · 4 March"]


async def test_another_writers_facts_are_found_by_meaning(module_butler: ButlerFactory) -> None:
    from butlers.modules.memory.store import MemoryStore
    from butlers.modules.memory.vectors import VectorIndex

    butler = await module_butler({"memory": {}})
    await butler.call("memory_search", {"query": "anything"})  # the index is now read
    # Another writer (its own store and index) adds a fact; no word of the question is in
    # it, so only the vector ranking can find it: the butler's index follows change_seq.
    module = next(m for m, _ in butler.built.modules.started if m.name == "memory")
    writer = MemoryStore(butler.context.pool, module.store.model, VectorIndex())
    await writer.store_fact("owner", "allergic_to", "penicillin")
    hits = await butler.call("memory_search", {"query": "which antibiotics can't I take?"})
    assert [hit["text"] for hit in hits] == ["owner · allergic_to · penicillin"]
    await butler.context.pool.execute("UPDATE memory_facts SET validity = 'retracted'")
    assert await butler.call("memory_search", {"query": "which antibiotics can't I take?"}) == []


async def test_without_its_model_the_module_fails_and_the_butler_keeps_its_tools(
    module_butler: ButlerFactory, tmp_path: Path
) -> None:
    butler = await module_butler({"memory": {"modelDir": str(tmp_path)}, "health": {}})
    state = butler.module("memory")
    assert state["status"] == "failed" and state["phase"] == "model"
    assert "lacks model.safetensors" in state["error"]
    names = await butler.tool_names()
    assert "measurement_log" in names and "state_get" in names
    assert not any(name.startswith("memory_") for name in names)


async def test_the_model_loads_on_first_use_and_is_released_when_idle(
    module_butler: ButlerFactory,
) -> None:
    import asyncio

    butler = await module_butler({"memory": {"modelIdleSeconds": 1}})
    module = next(m for m, _ in butler.built.modules.started if m.name == "memory")
    model = module.store.model
    assert not model.loaded  # a butler that has not searched carries no weights
    await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "pet", "content": "a cat"}
    )
    assert model.loaded and model.loads == 1
    for _ in range(100):
        if not model.loaded:
            break
        await asyncio.sleep(0.1)
    assert not model.loaded, "the weights stayed loaded past the idle time"
    [hit] = await butler.call("memory_search", {"query": "what animal lives with me?"})
    assert "a cat" in hit["text"] and model.loads == 2


async def test_a_repeated_text_is_not_encoded_again(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    module = next(m for m, _ in butler.built.modules.started if m.name == "memory")
    model = module.store.model
    first = await model.embed("the same scheduled prompt")
    embedder = await model.embedder()
    calls = 0
    encode_one = embedder.encode_one

    def counted(text: str) -> list[float]:
        nonlocal calls
        calls += 1
        return encode_one(text)

    embedder.encode_one = counted  # type: ignore[method-assign]
    again = await model.embed("the same scheduled prompt")
    assert calls == 0 and again == pytest.approx(first, abs=1e-6)
    await model.embed("another prompt")
    assert calls == 1


async def test_marking_a_fact_used_does_not_make_the_index_read_it_again(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"memory": {}})
    fact = await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "pet", "content": "a cat"}
    )
    pool = butler.context.pool
    seq = "SELECT change_seq FROM memory_facts WHERE id = $1"
    before = await pool.fetchval(seq, fact["id"])
    module = next(m for m, _ in butler.built.modules.started if m.name == "memory")
    await module.store.used([fact["id"]])
    await butler.call("memory_feedback", {"id": fact["id"], "outcome": "helpful"})
    assert await pool.fetchval(seq, fact["id"]) == before
    await butler.call("memory_retract", {"id": fact["id"]})
    assert await pool.fetchval(seq, fact["id"]) > before


async def test_a_butler_without_facts_searches_without_loading_the_model(
    module_butler: ButlerFactory,
) -> None:
    from butlers.modules.memory.model import Model
    from butlers.modules.memory.store import MemoryStore
    from butlers.modules.memory.vectors import VectorIndex

    butler = await module_butler({"memory": {}})
    module = next(m for m, _ in butler.built.modules.started if m.name == "memory")
    model = module.store.model
    assert await butler.call("memory_search", {"query": "which antibiotics can't I take?"}) == []
    assert not model.loaded and model.loads == 0  # nothing to score: no embedding
    # Another writer (its own model) adds a fact: the next search's sync brings it, so
    # the butler embeds its query and finds it by meaning alone.
    writer_model = Model(idle_seconds=0)
    writer = MemoryStore(butler.context.pool, writer_model, VectorIndex())
    await writer.store_fact("owner", "allergic_to", "penicillin")
    await writer_model.aclose()
    hits = await butler.call("memory_search", {"query": "which antibiotics can't I take?"})
    assert [hit["text"] for hit in hits] == ["owner · allergic_to · penicillin"]
    assert model.loads == 1


async def test_the_index_reads_both_tables_in_one_round_trip(
    module_butler: ButlerFactory,
) -> None:
    from butlers.modules.memory.vectors import VectorIndex

    butler = await module_butler({"memory": {}})
    await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "pet", "content": "a cat"}
    )
    await butler.call("memory_store_rule", {"content": "Feed the cat at seven."})

    class Counting:
        def __init__(self, conn: object) -> None:
            self.conn, self.fetched = conn, 0

        async def fetch(self, *args: object) -> object:
            self.fetched += 1
            return await self.conn.fetch(*args)  # type: ignore[attr-defined]

    index = VectorIndex()
    async with butler.context.pool.acquire() as conn:
        counting = Counting(conn)
        await index.sync(counting)  # type: ignore[arg-type]
        assert counting.fetched == 1
        assert (index.count(("fact",)), index.count(("rule",)), len(index)) == (1, 1, 2)
        await index.sync(counting)  # type: ignore[arg-type]  # nothing changed since
        assert counting.fetched == 2 and len(index) == 2
        await conn.execute("UPDATE memory_rules SET validity = 'retracted'")
        await index.sync(counting)  # type: ignore[arg-type]
        assert (index.count(("fact",)), index.count(("rule",))) == (1, 0)


async def test_a_search_is_one_round_trip_and_shows_what_another_writer_changed(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"memory": {}})
    fact = await butler.call(
        "memory_store_fact", {"subject": "owner", "predicate": "pet", "content": "a cat"}
    )
    module = next(m for m, _ in butler.built.modules.started if m.name == "memory")
    store = module.store
    pool = store._pool

    class Counting:
        """The pool, counting the queries a search sends."""

        def __init__(self) -> None:
            self.queries = 0

        def __getattr__(self, name: str) -> object:
            attribute = getattr(pool, name)
            if name in ("fetch", "fetchrow", "fetchval", "execute", "acquire"):
                self.queries += 1
            return attribute

    counting = Counting()
    store._pool = counting
    try:
        [hit] = await store.search("what animal lives with me?")
        assert counting.queries == 1, "a search takes one round trip (sync and full text)"
    finally:
        store._pool = pool
    assert (hit.text, hit.provenance) == ("owner · pet · a cat", "owner")
    # Another writer changes what a result shows, not the embedding: the index follows.
    await pool.execute(
        "UPDATE memory_facts SET provenance = 'untrusted', subject = 'Anna' WHERE id = $1",
        fact["id"],
    )
    [hit] = await butler.call("memory_search", {"query": "what animal lives with me?"})
    assert (hit["text"], hit["provenance"]) == ("Anna · pet · a cat", "untrusted")


async def test_no_statistics_for_the_embeddings_nor_a_pending_list_for_the_words(
    module_butler: ButlerFactory,
) -> None:
    # An ANALYZE spent almost all its time on them (14 of 15 s at 100,000 facts).
    butler = await module_butler({"memory": {}})
    targets = await butler.context.pool.fetch(
        "SELECT attrelid::regclass::text AS t, attstattarget FROM pg_attribute "
        "WHERE attname = 'embedding' AND attrelid IN "
        "('memory_facts'::regclass, 'memory_rules'::regclass) ORDER BY 1"
    )
    assert [(r["t"], r["attstattarget"]) for r in targets] == [
        ("memory_facts", 0),
        ("memory_rules", 0),
    ]
    # Nor a pending list every search reads: the full-text indexes take writes at once.
    options = await butler.context.pool.fetch(
        "SELECT relname, reloptions FROM pg_class WHERE relname IN "
        "('memory_facts_search_idx', 'memory_rules_search_idx') "
        "AND relnamespace = current_schema()::regnamespace ORDER BY 1"
    )
    assert [(r["relname"], r["reloptions"]) for r in options] == [
        ("memory_facts_search_idx", ["fastupdate=off"]),
        ("memory_rules_search_idx", ["fastupdate=off"]),
    ]
