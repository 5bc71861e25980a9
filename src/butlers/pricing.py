"""Model prices: tokens to US dollars, per session.

The built-in table covers well-known hosted models; `BUTLERS_PRICES` (read into
`ButlerSettings.prices`) adds or replaces entries, e.g. for a local model or a
negotiated rate: `{"llama3.1": {"input_per_mtok": 0.1, "output_per_mtok": 0.2}}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    # Input read from / written to the provider's prompt cache; None: billed as input.
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None


def _anthropic(input_per_mtok: float, output_per_mtok: float) -> Price:
    """Anthropic bills cache reads at a tenth of input, 5-minute cache writes at 1.25x."""
    return Price(input_per_mtok, output_per_mtok, input_per_mtok * 0.1, input_per_mtok * 1.25)


def _openai(input_per_mtok: float, output_per_mtok: float, cached_share: float) -> Price:
    """OpenAI caches on its own (no writes billed) and bills cached input at a share."""
    return Price(input_per_mtok, output_per_mtok, input_per_mtok * cached_share, None)


# USD per million tokens. Matched by exact name, then by the longest known prefix.
PRICES: dict[str, Price] = {
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "gpt-4o-mini": _openai(0.15, 0.60, 0.5),
    "gpt-4o": _openai(2.50, 10.0, 0.5),
    "gpt-4.1-mini": _openai(0.40, 1.60, 0.25),
    "gpt-4.1": _openai(2.0, 8.0, 0.25),
    "scripted": Price(0.0, 0.0),
}

PriceOverride = tuple[float, float] | tuple[float, float, float | None, float | None]


def price_table(overrides: Mapping[str, PriceOverride] | None = None) -> dict[str, Price]:
    """The built-in prices with `overrides` (model → (input, output[, cache read, cache
    write]) USD per Mtok) on top."""
    table = dict(PRICES)
    for model, values in (overrides or {}).items():
        table[model] = Price(*values)
    return table


def price_for(model: str | None, prices: Mapping[str, Price] = PRICES) -> Price | None:
    if not model:
        return None
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def cost_usd(
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    prices: Mapping[str, Price] = PRICES,
    *,
    cached_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> float | None:
    """The cost of a session, or None when the model's price or the token counts are
    unknown. `input_tokens` counts all input; the cached and written parts of it are
    priced at the cache rates."""
    price = price_for(model, prices)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    read = min(cached_tokens or 0, input_tokens)
    written = min(cache_write_tokens or 0, input_tokens - read)
    plain = input_tokens - read - written
    read_rate = (
        price.input_per_mtok if price.cache_read_per_mtok is None else price.cache_read_per_mtok
    )
    write_rate = (
        price.input_per_mtok if price.cache_write_per_mtok is None else price.cache_write_per_mtok
    )
    dollars = (
        plain * price.input_per_mtok
        + read * read_rate
        + written * write_rate
        + output_tokens * price.output_per_mtok
    ) / 1e6
    return round(dollars, 6)


def cache_savings_usd(
    model: str | None, cached_tokens: int | None, prices: Mapping[str, Price] = PRICES
) -> float | None:
    """What reading `cached_tokens` from the cache saved against sending them as input."""
    price = price_for(model, prices)
    if price is None or price.cache_read_per_mtok is None or not cached_tokens:
        return None if price is None else 0.0
    return round(cached_tokens * (price.input_per_mtok - price.cache_read_per_mtok) / 1e6, 6)
