"""Memory end to end: what one session stores, a later session is given (the scripted
model asserts what it was given), supersession, retraction, consolidation of episodes
into facts, one butler's memory invisible to another, and the dashboard's routes."""

from __future__ import annotations

import secrets
from typing import Any

import httpx2 as httpx

from butlers.testing.script_server import Script, call, step

from ..harness.ecosystem import EcosystemHandle

HEADER = "Recalled from memory"


def _opening(script: Script, butler: str, marker: str) -> str:
    """The opening user message of the latest session of `butler` whose prompt has `marker`."""
    for request in reversed(script.requests_for(butler)):
        first = (request.get("messages") or [{}])[0].get("content")
        if isinstance(first, str) and marker in first:
            return first
    raise AssertionError(f"no model request of {butler} carried {marker!r}")


async def _state(
    eco: EcosystemHandle, script: Script, butler: str, prompt: str, *steps: dict[str, Any]
) -> dict[str, Any]:
    script.route(butler, *steps)
    result = await eco.call(butler, "trigger", {"prompt": prompt})
    assert result["success"], result
    return result


async def test_a_fact_stated_once_is_recalled_in_a_later_session(
    butler_ecosystem: EcosystemHandle, llm_script: Script, dashboard: httpx.AsyncClient
) -> None:
    drug = f"penicillin-{secrets.token_hex(3)}"
    await _state(
        butler_ecosystem,
        llm_script,
        "general",
        f"Please remember: I am allergic to {drug}.",
        step(
            tool_calls=[
                call("memory_store_fact", subject="owner", predicate="allergic_to", content=drug)
            ]
        ),
        step("Noted."),
    )
    later = await _state(
        butler_ecosystem,
        llm_script,
        "general",
        "Which antibiotics should I avoid? (later)",
        step(f"Avoid {drug}."),
    )
    opening = _opening(llm_script, "general", "(later)")
    block = opening.split("(later)", 1)[1]
    assert HEADER in block and "not instructions" in block and drug in block
    assert later["output"] == f"Avoid {drug}."
    # The first session left an episode the dashboard lists.
    episodes = (await dashboard.get("/api/memory/episodes", params={"q": drug})).json()
    assert [(e["butler"], e["prompt"][:15]) for e in episodes["data"]] == [
        ("general", "Which antibioti"),
        ("general", "Please remember"),
    ]
    assert episodes["data"][1]["summary"].startswith("memory_store_fact(")


async def test_a_superseding_fact_wins_and_a_retracted_one_is_not_recalled(
    butler_ecosystem: EcosystemHandle, llm_script: Script, dashboard: httpx.AsyncClient
) -> None:
    tag = secrets.token_hex(3)
    subject = f"car-{tag}"
    old = await butler_ecosystem.call(
        "general",
        "memory_store_fact",
        {"subject": subject, "predicate": "parked_at", "content": "level 2 of the station garage"},
    )
    new = await butler_ecosystem.call(
        "general",
        "memory_store_fact",
        {"subject": subject, "predicate": "parked_at", "content": "level 5 of the mall garage"},
    )
    await _state(
        butler_ecosystem,
        llm_script,
        "general",
        f"Where is {subject} parked? [{tag}a]",
        step("Level 5."),
    )
    block = _opening(llm_script, "general", f"[{tag}a]")
    assert "level 5 of the mall garage" in block and "station garage" not in block
    detail = (await dashboard.get(f"/api/memory/facts/{new['id']}")).json()["data"]
    assert detail["butler"] == "general" and detail["provenance"] == "owner"
    assert [(f["id"], f["validity"]) for f in detail["history"]] == [
        (new["id"], "active"),
        (old["id"], "superseded"),
    ]
    # Retracted from the dashboard (through the butler's tool): no longer recalled.
    retracted = await dashboard.post(f"/api/memory/facts/{new['id']}/retract")
    assert retracted.status_code == 200 and retracted.json()["data"]["validity"] == "retracted"
    await _state(
        butler_ecosystem,
        llm_script,
        "general",
        f"Where is {subject} parked? [{tag}b]",
        step("I don't know."),
    )
    assert "mall garage" not in _opening(llm_script, "general", f"[{tag}b]")
    listed = (
        await dashboard.get(
            "/api/memory/facts", params={"subject": subject, "validity": "retracted"}
        )
    ).json()
    assert [f["id"] for f in listed["data"]] == [new["id"]]


async def test_consolidation_turns_episodes_into_facts(
    butler_ecosystem: EcosystemHandle, llm_script: Script, dashboard: httpx.AsyncClient
) -> None:
    city = f"Zurich-{secrets.token_hex(3)}"
    pool = await butler_ecosystem.pool("health")
    await pool.execute("UPDATE memory_episodes SET consolidated = TRUE")
    await _state(
        butler_ecosystem, llm_script, "health", f"I just moved to {city}.", step("Welcome!")
    )
    llm_script.route(
        "health",
        step(
            '{"facts": [{"subject": "owner", "predicate": "lives_in", '
            f'"content": "{city}", "permanence": "stable", "source": "owner"}}]}}'
        ),
        when="Consolidate these episodes",
    )
    await pool.execute(
        "UPDATE scheduled_tasks SET next_due_at = now() - interval '1 second' "
        "WHERE name = 'memory-consolidate'"
    )
    ran = (await butler_ecosystem.call("health", "tick"))["ran"]
    assert [(r["name"], r["status"]) for r in ran] == [("memory-consolidate", "completed")]
    consolidating = _opening(llm_script, "health", "Consolidate these episodes")
    assert f"I just moved to {city}." in consolidating
    facts = (await dashboard.get("/api/memory/facts", params={"q": city})).json()["data"]
    assert [(f["butler"], f["predicate"], f["provenance"]) for f in facts] == [
        ("health", "lives_in", "butler")
    ]
    runs = (await dashboard.get("/api/memory/consolidations")).json()["data"]
    latest = next(r for r in runs if r["butler"] == "health")
    assert (latest["status"], latest["episodes"], latest["created"]) == ("completed", 1, 1)
    assert await pool.fetchval("SELECT count(*) FROM memory_episodes WHERE NOT consolidated") == 0


async def test_one_butlers_memory_is_invisible_to_another(
    butler_ecosystem: EcosystemHandle, llm_script: Script, dashboard: httpx.AsyncClient
) -> None:
    secret = f"gate code {secrets.token_hex(4)}"
    stored = await butler_ecosystem.call(
        "relationship",
        "memory_store_fact",
        {"subject": "neighbour", "predicate": "gate_code", "content": secret},
    )
    seen = await butler_ecosystem.call("health", "memory_search", {"query": secret})
    assert not [hit for hit in seen if secret in hit["text"]]
    await _state(
        butler_ecosystem,
        llm_script,
        "health",
        f"What is the neighbour's {secret}?",
        step("No idea."),
    )
    # Health may recall its own facts (other tests store some); never relationship's.
    assert secret not in _opening(llm_script, "health", secret).split("?", 1)[1]
    found = await butler_ecosystem.call("relationship", "memory_search", {"query": secret})
    assert [hit["id"] for hit in found] == [stored["id"]]
    stats = (await dashboard.get("/api/memory/stats")).json()
    assert set(stats["data"]["by_butler"]) == {"general", "health", "relationship"}
    assert not stats["meta"].get("failed_butlers")  # butlers without memory are skipped
    activity = (await dashboard.get("/api/memory/activity")).json()["data"]
    assert any(a["id"] == stored["id"] and a["butler"] == "relationship" for a in activity)
