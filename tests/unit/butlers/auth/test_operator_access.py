"""`operator: True`: the owner's view of a butler (status, session log, schedules,
counters) is never offered to an LLM session nor callable by one; the owner keeps it."""

from butlers.auth.access import access_meta, may_list, refusal
from butlers.auth.identity import Identity, session, user

SESSION = session("s1")
ROUTER = Identity("butler", "switchboard", router=True)


def test_a_session_neither_sees_nor_calls_an_operator_tool() -> None:
    meta = {"module": "core"} | access_meta(operator=True)
    assert not may_list(SESSION, meta)
    reason = refusal(SESSION, "sessions_list", meta, {})
    assert reason is not None and "operator" in reason and "sessions_list" in reason


def test_the_owner_keeps_every_operator_tool() -> None:
    meta = access_meta(operator=True)
    assert may_list(user(), meta) and refusal(user(), "status", meta, {}) is None


def test_operator_does_not_change_what_a_router_may_call() -> None:
    meta = access_meta(router=True, operator=True)  # briefing_sections
    assert refusal(ROUTER, "briefing_sections", meta, {}) is None
    assert refusal(SESSION, "briefing_sections", meta, {}) is not None


def test_a_plain_tool_stays_open_to_sessions() -> None:
    assert may_list(SESSION, {"module": "health"})
    assert refusal(SESSION, "measurement_log", {"module": "health"}, {}) is None
