"""The LLM script: routed steps first, then sequential ones, strict about leftovers."""

from __future__ import annotations

from butlers.testing.script_server import Script, step


def test_routed_steps_win_over_sequential_ones() -> None:
    script = Script().add(step("seq")).route("health", step("routed"))
    assert script.next_step({"butler": "health"}) == {"text": "routed"}
    assert script.next_step({"butler": "health"}) == {"text": "seq"}
    assert script.check() == [] and len(script.requests) == 2


def test_exhausted_and_leftover_scripts_are_reported() -> None:
    script = Script().route("general", step("unused"))
    assert script.next_step({"butler": "health"}) is None
    problems = script.check()
    assert any("exhausted" in p for p in problems)
    assert any("routed to 'general'" in p for p in problems)
