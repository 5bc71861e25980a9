"""Tokens per message: what the model is sent for each standard message of the e2e
scenarios, before and after compact tool definitions and prompt caching.

The switchboard and its targets run as processes with the scripted model; every model
request the butlers make is recorded, then rendered as the OpenAI-compatible and the
Anthropic adapters would send it. Baseline in the same run: the same requests with the
tool definitions as the butlers declare them and no cache marks (how every request
went out before this work).

Tokens are an estimate: UTF-8 bytes / 4, OpenAI's rule of thumb (no tokenizer of a
hosted model family runs offline here; JSON schemas tokenise a little denser, so
absolute figures are approximate and the ratios are what to read). Billed-equivalent
tokens price a warm cache: the cached prefix (tools and system, when at least the
model's minimum of 1,024 tokens) at a tenth, as Anthropic bills reads. Dollars use the
shipped price table (claude-sonnet-4-5). Goal for "Log my weight: 80kg": at most 2,500
input tokens and 1,000 billed-equivalent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import scripted_pipeline
from butlers.llm.anthropic import anthropic_prefix, to_anthropic_messages
from butlers.llm.openai import to_openai_messages, to_openai_tools
from butlers.llm.types import ToolSpec
from butlers.pricing import price_for
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import ScriptServer, call, step

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from scenarios import SCENARIOS

BYTES_PER_TOKEN = 4
MIN_CACHED_PREFIX = 1024  # tokens: Anthropic caches no shorter prefix (Sonnet, Opus)
CACHE_READ_SHARE = 0.1
PRICED_AS = "claude-sonnet-4-5"
WEIGHT = "Log my weight: 80kg"
WEIGHT_SCRIPT = {
    "health": [
        step(tool_calls=[call("measurement_log", type="weight", value=80, unit="kg")]),
        step("Logged your weight: 80 kg."),
    ]
}


def tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


@dataclass
class Figures:
    input: int = 0
    billed: float = 0.0
    output: int = 0

    def dollars(self) -> float:
        price = price_for(PRICED_AS)
        assert price is not None
        return (self.billed * price.input_per_mtok + self.output * price.output_per_mtok) / 1e6


def openai_tokens(request: dict[str, Any], compact: bool) -> int:
    tools = [ToolSpec(t["name"], t["description"], t["input_schema"]) for t in request["tools"]]
    wire = {"messages": to_openai_messages(request["system"], request["messages"])}
    if tools:
        wire["tools"] = to_openai_tools(tools, compact=compact)
    return tokens(wire)


def anthropic_figures(request: dict[str, Any], compact: bool) -> tuple[int, float]:
    """(input tokens, billed-equivalent with a warm cache) of one request."""
    tools = [ToolSpec(t["name"], t["description"], t["input_schema"]) for t in request["tools"]]
    if compact:
        prefix = anthropic_prefix(request["system"], tools)
    else:
        prefix = {"system": request["system"], "tools": [t.to_json() for t in tools]}
    stable = tokens(prefix.get("tools") or []) + tokens(prefix.get("system") or "")
    rest = tokens(to_anthropic_messages(request["messages"]))
    total = stable + rest
    if not compact or stable < MIN_CACHED_PREFIX:
        return total, float(total)
    return total, rest + stable * CACHE_READ_SHARE


def script_message(server: ScriptServer, butler: str, text: str, steps: list[Any]) -> None:
    entries = [{"butler": butler, "prompt": text, "segment": text}]
    server.script.route("switchboard", step(json.dumps(entries)))
    server.script.route(butler, *steps)


async def measure() -> list[tuple[str, Figures, Figures, Figures]]:
    messages = [(WEIGHT, "health", WEIGHT_SCRIPT["health"])]
    for scenario in SCENARIOS:
        steps = scenario.script.get(scenario.expected_butler)
        if steps and not scenario.skip_reason:
            messages.append((scenario.input_prompt, scenario.expected_butler, steps))
    results = []
    async with scripted_pipeline() as (scripts, client):
        for text, butler, steps in messages:
            before = len(scripts.script.requests)
            script_message(scripts, butler, text, steps)
            envelope = json.loads(build_envelope(text).model_dump_json())
            await client.call_tool("ingest_v1", {"envelope": envelope, "wait": True})
            requests = scripts.script.requests[before:]
            start, openai_now, anthropic_now = Figures(), Figures(), Figures()
            for request in requests:
                request.setdefault("tools", [])
                out = 20  # a short answer or one tool call
                start.input += openai_tokens(request, compact=False)
                start.billed += openai_tokens(request, compact=False)
                openai_now.input += openai_tokens(request, compact=True)
                openai_now.billed += openai_tokens(request, compact=True)
                total, billed = anthropic_figures(request, compact=True)
                anthropic_now.input += total
                anthropic_now.billed += billed
                for figures in (start, openai_now, anthropic_now):
                    figures.output += out
            results.append((text, start, openai_now, anthropic_now))
    return results


async def main() -> None:
    results = await measure()
    print("tokens per message (estimate: UTF-8 bytes / 4), scripted model, butlers as processes")
    print(f"billed-equivalent: warm prompt cache, reads at {CACHE_READ_SHARE:g}; $ at {PRICED_AS}")
    header = f"{'message':42} {'start in':>8} {'now in':>7} {'ratio':>6} {'billed':>7} {'ratio':>6}"
    print(header + f" {'$ start':>9} {'$ now':>9}")
    for text, start, openai_now, anthropic_now in results:
        print(
            f"{text[:42]:42} {start.input:8d} {openai_now.input:7d} "
            f"{openai_now.input / start.input:6.2f} {anthropic_now.billed:7.0f} "
            f"{anthropic_now.billed / start.billed:6.2f} "
            f"{start.dollars():9.5f} {anthropic_now.dollars():9.5f}"
        )
    weight = results[0]
    met_input = weight[2].input <= 2500
    met_billed = weight[3].billed <= 1000
    print(
        f"goal for {WEIGHT!r}: input {weight[2].input} <= 2500 "
        f"({'met' if met_input else 'not met'}), billed-equivalent {weight[3].billed:.0f} "
        f"<= 1000 ({'met' if met_billed else 'not met'})"
    )


if __name__ == "__main__":
    asyncio.run(main())
