"""The LLM script: routed steps first, then sequential ones, strict about leftovers."""

from __future__ import annotations

import time

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


def test_steps_matched_by_text_go_only_to_requests_that_contain_it() -> None:
    script = (
        Script()
        .route("health", step("for B"), when="message B")
        .route("health", step("for A"), when="message A")
    )
    ask_a = {"butler": "health", "messages": [{"role": "user", "content": "message A"}]}
    ask_b = {"butler": "health", "messages": [{"role": "user", "content": "message B"}]}
    assert script.next_step(ask_a) == {"text": "for A"}
    assert script.next_step(ask_b) == {"text": "for B"}
    assert script.next_step(ask_a) is None
    assert any("exhausted" in p for p in script.check())


def test_a_held_request_waits_until_released() -> None:
    import threading

    script = Script().route("health", step("done", hold="gate"))
    answers: list[dict | None] = []
    waiter = threading.Thread(target=lambda: answers.append(script.answer({"butler": "health"})))
    waiter.start()
    deadline = time.monotonic() + 5
    while script.held("gate") != 1:
        assert time.monotonic() < deadline, "the request never reached the hold"
        time.sleep(0.01)
    assert answers == []
    script.release("gate")
    waiter.join(5)
    assert answers == [{"text": "done"}] and script.held("gate") == 0


def test_measured_usage_grows_with_the_request() -> None:
    script = Script().route("health", step("ok", usage="measured"), step("ok", usage="measured"))
    short = script.answer({"butler": "health", "messages": [{"content": "x" * 4}]})
    long = script.answer({"butler": "health", "messages": [{"content": "x" * 804}]})
    assert short and long
    assert long["usage"]["input_tokens"] - short["usage"]["input_tokens"] == 200
    assert short["usage"]["output_tokens"] == long["usage"]["output_tokens"] > 0
