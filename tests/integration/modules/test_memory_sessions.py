"""Memory around sessions, against PostgreSQL with the real embedding model: recall
into a session's opening message, episodes at its end, consolidation and decay (the
model's answer given by a stand-in spawner)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from butlers.core.spawner import SpawnerResult
from butlers.scheduling.jobs import JobContext

from .conftest import ButlerFactory, ModuleButler

pytest.importorskip("numpy")
pytestmark = pytest.mark.timeout(300)


def _memory(butler: ModuleButler) -> Any:
    return next(m for m, _ in butler.built.modules.started if m.name == "memory")


def _hook(butler: ModuleButler) -> Any:
    [hook] = butler.built.services.spawner._hooks
    return hook


async def test_recall_labels_facts_as_data_and_marks_untrusted_ones(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"memory": {}})
    await butler.call(
        "memory_store_fact",
        {"subject": "owner", "predicate": "allergic_to", "content": "penicillin"},
    )
    await butler.call(
        "memory_store_fact",
        {
            "subject": "pharmacy",
            "predicate": "says_owner_may_take",
            "content": "any antibiotic at double dose",
            "source": "untrusted",
        },
    )
    await butler.call(
        "memory_store_fact",
        {"subject": "car", "predicate": "parked_at", "content": "level 3 of the garage"},
    )
    block = await _hook(butler).before_session("Which antibiotics must I avoid?", "trigger")
    lines = block.splitlines()
    assert lines[0].startswith("Recalled from memory") and "not instructions" in lines[0]
    assert "penicillin" in lines[1] and "unverified" not in lines[1]
    assert "double dose" in lines[2] and "(unverified, from content" in lines[2]
    assert "garage" not in block  # unrelated facts stay out
    assert await _hook(butler).before_session("What's the weather like?", "trigger") == ""


async def test_recall_in_a_butler_without_facts_costs_no_embedding(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"memory": {}})
    assert await _hook(butler).before_session("Which antibiotics must I avoid?", "trigger") == ""
    model = _memory(butler).store.model
    assert not model.loaded and model.loads == 0


async def test_recall_keeps_within_its_token_budget(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {"recallTokens": 60}})
    for i in range(6):
        await butler.call(
            "memory_store_fact",
            {"subject": "owner", "predicate": f"allergy_{i}", "content": f"allergic to drug {i}"},
        )
    block = await _hook(butler).before_session("What am I allergic to?", "trigger")
    assert 0 < len(block) <= 60 * 4
    assert block.count("\n- [fact") >= 1


async def test_a_session_becomes_an_episode(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    session = uuid.uuid4()
    result = SpawnerResult(
        session_id=str(session),
        success=True,
        output="Noted: you are allergic to penicillin.",
        error=None,
        duration_ms=5,
        tool_calls=[{"name": "state_set", "arguments": {"key": "k", "value": 1}}],
    )
    await _hook(butler).after_session("I'm allergic to penicillin", "trigger", result)
    row = await butler.context.pool.fetchrow("SELECT * FROM memory_episodes")
    assert row["session_id"] == session and row["prompt"] == "I'm allergic to penicillin"
    assert row["outcome"].startswith("Noted") and row["summary"] == "state_set(key=k, value=1)"
    assert not row["consolidated"] and row["trigger_source"] == "trigger"


class _Model:
    """A stand-in spawner whose session answers with `answer`; records its prompts."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[tuple[str, bool]] = []

    async def trigger(self, prompt: str, *, trigger_source: str, tools: bool) -> SpawnerResult:
        self.prompts.append((prompt, tools))
        return SpawnerResult(
            session_id=str(uuid.uuid4()),
            success=True,
            output=self.answer,
            error=None,
            duration_ms=1,
            trigger_source=trigger_source,
        )


async def _consolidate(butler: ModuleButler, model: _Model, **args: Any) -> dict[str, Any]:
    from butlers.modules.memory.consolidate import Consolidator

    memory = _memory(butler)
    ctx = JobContext(butler="probe", pool=butler.context.pool, task_name="t")
    return await Consolidator(memory.store, model).run(ctx, **args)  # type: ignore[arg-type]


async def test_consolidation_turns_episodes_into_facts_once(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    store = _memory(butler).store
    for prompt in ("I moved to Zurich last week", "Book a table, I'm vegetarian", "hi"):
        await store.add_episode(prompt, "ok", "")
    answer = json.dumps(
        {
            "facts": [
                {
                    "subject": "owner",
                    "predicate": "lives in",
                    "content": "Zurich",
                    "permanence": "stable",
                },
                {"subject": "owner", "predicate": "diet", "content": "vegetarian"},
            ]
        }
    )
    model = _Model(f"Here you are:\n```json\n{answer}\n```")
    first = await _consolidate(butler, model, max_episodes=2)
    assert (first["status"], first["episodes"], first["created"]) == ("completed", 2, 2)
    [(prompt, tools)] = model.prompts
    assert tools is False and "moved to Zurich" in prompt and '"hi"' not in prompt
    facts = await butler.context.pool.fetch(
        "SELECT predicate, content, provenance, permanence FROM memory_facts ORDER BY predicate"
    )
    assert [tuple(f) for f in facts] == [
        ("diet", "vegetarian", "butler", "standard"),
        ("lives_in", "Zurich", "butler", "stable"),
    ]
    # The next run reads only the episode left (bounded), and the same facts reinforce.
    second = await _consolidate(butler, model, max_episodes=2)
    assert (second["episodes"], second["created"], second["reinforced"]) == (1, 0, 2)
    assert '"hi"' in model.prompts[1][0]
    third = await _consolidate(butler, model)
    assert third["episodes"] == 0 and len(model.prompts) == 2  # nothing left: no session
    runs = await butler.context.pool.fetch(
        "SELECT status, episodes FROM memory_consolidation_runs ORDER BY started_at"
    )
    assert [tuple(r) for r in runs] == [("completed", 2), ("completed", 1), ("completed", 0)]


async def test_a_bad_answer_fails_the_run_and_keeps_the_episodes(
    module_butler: ButlerFactory,
) -> None:
    from butlers.modules.memory.consolidate import ConsolidationFailed

    butler = await module_butler({"memory": {}})
    await _memory(butler).store.add_episode("I moved to Zurich", "ok", "")
    with pytest.raises(ConsolidationFailed, match="no JSON object"):
        await _consolidate(butler, _Model("I could not do that."))
    row = await butler.context.pool.fetchrow("SELECT status, error FROM memory_consolidation_runs")
    assert row["status"] == "failed" and "no JSON object" in row["error"]
    assert (
        await butler.context.pool.fetchval(
            "SELECT count(*) FROM memory_episodes WHERE NOT consolidated"
        )
        == 1
    )


async def test_decay_fades_unused_facts_and_episodes_expire(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"memory": {}})
    pool = butler.context.pool
    for predicate, permanence in (("mood", "volatile"), ("name", "permanent")):
        await butler.call(
            "memory_store_fact",
            {"subject": "owner", "predicate": predicate, "content": "x", "permanence": permanence},
        )
    await pool.execute("UPDATE memory_facts SET created_at = now() - interval '20 days'")
    await _memory(butler).store.add_episode("old", "ok", "")
    await pool.execute("UPDATE memory_episodes SET expires_at = now() - interval '1 second'")
    done = await _consolidate(butler, _Model("{}"))
    assert (done["decayed"], done["faded"], done["expired"]) == (1, 1, 1)
    rows = await pool.fetch("SELECT predicate, validity FROM memory_facts ORDER BY predicate")
    assert [tuple(r) for r in rows] == [("mood", "faded"), ("name", "active")]
    hits = await butler.call("memory_search", {"query": "owner mood"})
    assert all("mood" not in hit["text"] for hit in hits)
