"""The e2e cost tracker: tokens and dollars per scenario from session rows, and limits."""

from __future__ import annotations

from tests.e2e.harness.cost import CostTracker


def test_cost_adds_up_per_scenario_from_the_pricing_table() -> None:
    tracker = CostTracker()
    entry = tracker.record(
        "health-weight-log",
        [
            {
                "model": "claude-haiku-4-5",
                "llm_call_count": 3,
                "input_tokens": 2000,
                "output_tokens": 100,
            },
            {
                "model": "claude-haiku-4-5",
                "llm_call_count": 1,
                "input_tokens": 1000,
                "output_tokens": 100,
            },
        ],
    )
    assert (entry.sessions, entry.llm_calls) == (2, 4)
    assert (entry.input_tokens, entry.output_tokens) == (3000, 200)
    assert round(entry.cost_usd, 6) == 0.004  # 3000 * $1/M + 200 * $5/M
    assert tracker.scenario_problem(entry) is None
    assert tracker.total_problem() is None
    assert tracker.summary()[-1].startswith(
        "total: 2 session(s), 4 LLM call(s), 3000 in / 200 out tokens"
    )


def test_a_scenario_over_the_input_token_limit_is_a_problem() -> None:
    tracker = CostTracker()
    entry = tracker.record("s", [{"model": "gpt-4o-mini", "input_tokens": 10_001}])
    assert "10001 input tokens" in (tracker.scenario_problem(entry) or "")


def test_a_total_over_twenty_cents_is_a_problem() -> None:
    tracker = CostTracker()
    tracker.record("s", [{"model": "claude-opus-4", "input_tokens": 9000, "output_tokens": 1000}])
    assert "more than $0.20" in (tracker.total_problem() or "")


def test_models_without_a_price_are_named_in_the_summary() -> None:
    tracker = CostTracker()
    tracker.record("s", [{"model": "local-llama", "input_tokens": 10, "output_tokens": 1}])
    assert "no price for local-llama" in tracker.summary()[0]
