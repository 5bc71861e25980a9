from butlers.pricing import cache_savings_usd, cost_usd, price_for, price_table


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


def test_cached_input_is_priced_at_the_cache_rates() -> None:
    # Haiku 4.5: $1 input, reads at a tenth, writes at 1.25x, $5 output.
    full = cost_usd("claude-haiku-4-5", 1_000_000, 0)
    warm = cost_usd("claude-haiku-4-5", 1_000_000, 0, cached_tokens=800_000)
    cold = cost_usd("claude-haiku-4-5", 1_000_000, 0, cache_write_tokens=800_000)
    assert (full, warm, cold) == (1.0, 0.28, 1.2)
    # OpenAI caches on its own: cached input at half price on gpt-4o, writes not billed extra.
    assert cost_usd("gpt-4o", 1_000_000, 0, cached_tokens=1_000_000) == 1.25
    # More cached tokens than input (a provider's rounding) never prices below zero input.
    assert cost_usd("claude-haiku-4-5", 100, 0, cached_tokens=500) == cost_usd(
        "claude-haiku-4-5", 100, 0, cached_tokens=100
    )


def test_a_model_without_cache_rates_bills_cached_input_as_input() -> None:
    table = price_table({"llama3.1": (1.0, 2.0)})
    assert cost_usd("llama3.1", 1_000_000, 0, table, cached_tokens=900_000) == 1.0
    assert cache_savings_usd("llama3.1", 900_000, table) == 0.0
    assert cache_savings_usd("claude-sonnet-4-5", 1_000_000) == 2.7
    assert cache_savings_usd("my-local-llama", 10) is None
