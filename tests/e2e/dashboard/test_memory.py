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


async def test_a_fact_shared_with_health_is_recalled_there_and_nowhere_else(
    butler_ecosystem: EcosystemHandle, llm_script: Script, dashboard: httpx.AsyncClient
) -> None:
    secret = f"vaccinated against tick-borne encephalitis {secrets.token_hex(3)}"
    stored = await butler_ecosystem.call(
        "relationship",
        "memory_store_fact",
        {"subject": "Anna", "predicate": "vaccination", "content": secret},
    )

    async def holders(query: str) -> dict[str, list[dict[str, Any]]]:
        found = {}
        for name in ("general", "health"):
            hits = await butler_ecosystem.call(name, "memory_search", {"query": query})
            found[name] = [hit for hit in hits if secret in hit["text"]]
        return found

    assert await holders(secret) == {"general": [], "health": []}
    # Owner-controlled only: nonexistent or memory-less butlers are refused by name.
    refused = await dashboard.post(
        f"/api/memory/facts/{stored['id']}/share", json={"butlers": ["health", "switchboard"]}
    )
    assert refused.status_code == 400 and "switchboard" in refused.json()["error"]["message"]
    shared = await dashboard.post(
        f"/api/memory/facts/{stored['id']}/share", json={"butlers": ["health"]}
    )
    assert shared.status_code == 200, shared.text
    assert shared.json()["data"]["shared_with"] == ["health"]
    found = await holders(secret)
    assert found["general"] == []
    [copy] = found["health"]
    assert copy["shared_from"] == "relationship" and copy["provenance"] == "owner"
    await _state(
        butler_ecosystem,
        llm_script,
        "health",
        f"Is Anna protected against ticks? [{stored['id'][:8]}]",
        step("Yes."),
    )
    block = _opening(llm_script, "health", f"[{stored['id'][:8]}]").split("]", 1)[1]
    assert secret in block and "shared by the relationship butler" in block
    # The copy never supersedes health's own fact on the same subject and predicate.
    own = await butler_ecosystem.call(
        "health",
        "memory_store_fact",
        {"subject": "Anna", "predicate": "vaccination", "content": "flu shot in October"},
    )
    assert own["supersedes"] is None
    assert len((await holders(secret))["health"]) == 1
    audit = (await dashboard.get("/api/audit-log", params={"butler": "health"})).json()["data"]
    assert any(e["operation"] == "memory.fact.receive_shared" for e in audit)
    unshared = await dashboard.post(f"/api/memory/facts/{stored['id']}/share", json={"butlers": []})
    assert unshared.status_code == 200 and unshared.json()["data"]["shared_with"] == []
    assert await holders(secret) == {"general": [], "health": []}


async def test_consolidate_now_runs_from_the_dashboard_and_is_audited(
    butler_ecosystem: EcosystemHandle, llm_script: Script, dashboard: httpx.AsyncClient
) -> None:
    dish = f"risotto-{secrets.token_hex(3)}"
    pool = await butler_ecosystem.pool("general")
    await pool.execute("UPDATE memory_episodes SET consolidated = TRUE")
    await _state(
        butler_ecosystem, llm_script, "general", f"My favourite dish is {dish}.", step("Yum.")
    )
    llm_script.route(
        "general",
        step(
            '{"facts": [{"subject": "owner", "predicate": "favourite_dish", '
            f'"content": "{dish}", "permanence": "stable", "source": "owner"}}]}}'
        ),
        when="Consolidate these episodes",
    )
    refused = await dashboard.post("/api/memory/consolidate", json={"butler": "switchboard"})
    assert refused.status_code == 400 and "no memory" in refused.json()["error"]["message"]
    answer = await dashboard.post("/api/memory/consolidate", json={"butler": "general"})
    assert answer.status_code == 200, answer.text
    result = answer.json()["data"]
    assert (result["butler"], result["status"], result["episodes"], result["created"]) == (
        "general",
        "completed",
        1,
        1,
    )
    facts = (await dashboard.get("/api/memory/facts", params={"q": dish})).json()["data"]
    assert [(f["butler"], f["predicate"]) for f in facts] == [("general", "favourite_dish")]
    runs = (await dashboard.get("/api/memory/consolidations")).json()["data"]
    [run] = [r for r in runs if r["id"] == result["run"]]
    assert (run["butler"], run["trigger"], run["status"]) == ("general", "owner", "completed")
    audit = (await dashboard.get("/api/audit-log", params={"butler": "general"})).json()["data"]
    [entry] = [e for e in audit if e["operation"] == "memory.consolidate"][:1]
    assert entry["status"] == "ok"
