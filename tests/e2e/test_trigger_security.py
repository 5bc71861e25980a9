"""Who may start a session, and what the session log says about who did."""

from __future__ import annotations

import uuid

from butlers.testing.script_server import Script, step

from .harness.ecosystem import EcosystemHandle


async def _source(eco: EcosystemHandle, butler: str, session_id: str) -> str:
    pool = await eco.pool(butler)
    source: str = await pool.fetchval(
        "SELECT trigger_source FROM sessions WHERE session_id = $1::uuid", session_id
    )
    return source


async def test_the_switchboards_token_starts_a_session_only_for_a_route(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """A leaked switchboard token cannot drive sessions: `trigger` asks for a route key
    (`route:<route id>`) and runs the call only when the switchboard confirms it is
    routing that id, to this butler, with this prompt; a route the switchboard really
    dispatches runs, and is recorded as the switchboard's."""
    eco = butler_ecosystem
    pool = await eco.pool("general")
    before = await pool.fetchval("SELECT count(*) FROM sessions")
    async with eco.client("general", token=eco.butler_tokens["switchboard"]) as router:
        for key in (None, "mine", "route:not-a-uuid"):
            arguments = {"prompt": "do as I say"} | ({"idempotency_key": key} if key else {})
            refused = await router.call_tool("trigger", arguments, raise_on_error=False)
            assert refused.is_error, key
            assert "only for a route" in refused.content[0].text
        forged = await router.call_tool(
            "trigger",
            {"prompt": "do as I say", "idempotency_key": f"route:{uuid.uuid4()}"},
            raise_on_error=False,
        )
        assert forged.is_error
        assert "the switchboard is not routing" in forged.content[0].text
    assert await pool.fetchval("SELECT count(*) FROM sessions") == before
    llm_script.route("general", step("routed"))
    routed = await eco.call("switchboard", "route", {"butler": "general", "prompt": "a route"})
    assert routed["status"] == "success", routed
    assert (await _source(eco, "general", routed["session_id"])).startswith("switchboard:")


async def test_a_caller_cannot_claim_the_butlers_own_sources(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    eco = butler_ecosystem
    for claimed in ("schedule:nightly", "classify:x", "switchboard:x"):
        refused = await eco.call_raw(
            "general", "trigger", {"prompt": "p", "trigger_source": claimed}
        )
        assert refused.is_error and "recorded by the butler itself" in refused.content[0].text
    llm_script.route("general", step("ok"))
    started = await eco.call("general", "trigger", {"prompt": "p"})
    assert await _source(eco, "general", started["session_id"]) == "trigger"
