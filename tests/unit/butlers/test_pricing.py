from butlers.pricing import cost_usd, price_for, price_table


def test_cost_uses_the_longest_matching_prefix() -> None:
    assert price_for("claude-haiku-4-5-20251001") == price_for("claude-haiku-4-5")
    assert cost_usd("claude-haiku-4-5-20251001", 1_000_000, 100_000) == 1.5


def test_unknown_model_or_tokens_have_no_cost() -> None:
    assert cost_usd("my-local-llama", 10, 10) is None
    assert cost_usd("gpt-4o", None, 10) is None


def test_configured_prices_add_to_and_override_the_table() -> None:
    table = price_table({"llama3.1": (0.1, 0.2), "gpt-4o": (1.0, 2.0)})
    assert cost_usd("llama3.1:8b", 1_000_000, 1_000_000, table) == 0.3
    assert cost_usd("gpt-4o", 1_000_000, 0, table) == 1.0
    assert cost_usd("claude-haiku-4-5", 1_000_000, 0, table) == 1.0
    assert cost_usd("llama3.1", 10, 10) is None  # the built-in table is unchanged
