"""Token and cost accounting of live-model e2e runs, from the sessions rows they leave."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from butlers.pricing import cost_usd

MAX_TOTAL_USD = 0.20
MAX_SCENARIO_INPUT_TOKENS = 10_000


@dataclass
class ScenarioCost:
    scenario: str
    sessions: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_models: set[str] = field(default_factory=set)


@dataclass
class CostTracker:
    """Accumulates the sessions of each scenario; checks the spending limits."""

    max_total_usd: float = MAX_TOTAL_USD
    max_scenario_input_tokens: int = MAX_SCENARIO_INPUT_TOKENS
    scenarios: list[ScenarioCost] = field(default_factory=list)

    def record(self, scenario: str, sessions: Iterable[Mapping[str, Any]]) -> ScenarioCost:
        """Add the session rows (model, llm_call_count, input_tokens, output_tokens) of
        one scenario."""
        entry = ScenarioCost(scenario)
        for row in sessions:
            entry.sessions += 1
            entry.llm_calls += row.get("llm_call_count") or 0
            tokens_in, tokens_out = row.get("input_tokens") or 0, row.get("output_tokens") or 0
            entry.input_tokens += tokens_in
            entry.output_tokens += tokens_out
            cost = cost_usd(row.get("model"), tokens_in, tokens_out)
            if cost is None:
                entry.unpriced_models.add(str(row.get("model")))
            else:
                entry.cost_usd += cost
        self.scenarios.append(entry)
        return entry

    def scenario_problem(self, entry: ScenarioCost) -> str | None:
        if entry.input_tokens > self.max_scenario_input_tokens:
            return (
                f"scenario {entry.scenario} used {entry.input_tokens} input tokens, "
                f"more than {self.max_scenario_input_tokens}"
            )
        return None

    @property
    def total_usd(self) -> float:
        return sum(s.cost_usd for s in self.scenarios)

    def total_problem(self) -> str | None:
        if self.total_usd > self.max_total_usd:
            return f"live LLM runs cost ${self.total_usd:.4f}, more than ${self.max_total_usd:.2f}"
        return None

    def summary(self) -> list[str]:
        lines = [
            f"{s.scenario}: {s.sessions} session(s), {s.llm_calls} LLM call(s), "
            f"{s.input_tokens} in / "
            f"{s.output_tokens} out tokens, ${s.cost_usd:.4f}"
            + (
                f" (no price for {', '.join(sorted(s.unpriced_models))})"
                if s.unpriced_models
                else ""
            )
            for s in self.scenarios
        ]
        total_in = sum(s.input_tokens for s in self.scenarios)
        total_out = sum(s.output_tokens for s in self.scenarios)
        sessions = sum(s.sessions for s in self.scenarios)
        calls = sum(s.llm_calls for s in self.scenarios)
        lines.append(
            f"total: {sessions} session(s), {calls} LLM call(s), {total_in} in / "
            f"{total_out} out tokens, "
            f"${self.total_usd:.4f} (limit ${self.max_total_usd:.2f})"
        )
        return lines
