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


# USD per million tokens. Matched by exact name, then by the longest known prefix.
PRICES: dict[str, Price] = {
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-opus-4": Price(15.0, 75.0),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.0),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1": Price(2.0, 8.0),
    "scripted": Price(0.0, 0.0),
}


def price_table(overrides: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Price]:
    """The built-in prices with `overrides` (model → (input, output) USD per Mtok) on top."""
    table = dict(PRICES)
    for model, (input_per_mtok, output_per_mtok) in (overrides or {}).items():
        table[model] = Price(input_per_mtok, output_per_mtok)
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
) -> float | None:
    """The cost of a session, or None when the model's price or the token counts are unknown."""
    price = price_for(model, prices)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return round(
        input_tokens * price.input_per_mtok / 1e6 + output_tokens * price.output_per_mtok / 1e6, 6
    )
