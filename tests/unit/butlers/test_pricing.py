from butlers.pricing import cost_usd, price_for


def test_cost_uses_the_longest_matching_prefix() -> None:
    assert price_for("claude-haiku-4-5-20251001") == price_for("claude-haiku-4-5")
    assert cost_usd("claude-haiku-4-5-20251001", 1_000_000, 100_000) == 1.5


def test_unknown_model_or_tokens_have_no_cost() -> None:
    assert cost_usd("my-local-llama", 10, 10) is None
    assert cost_usd("gpt-4o", None, 10) is None
