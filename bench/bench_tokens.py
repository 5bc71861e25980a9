"""Tokens per message: what the model is sent for each standard message of the e2e
scenarios, before and after the work on tokens (compact tool definitions, prompt
caching, fewer tools per session, a shorter classifier prompt).

The switchboard and its targets run as processes with the scripted model; every model
request the butlers make is recorded, then rendered as the OpenAI-compatible and the
Anthropic adapters would send it. Baselines in the same run, from the same requests:

- start: how every request went out before this work: the classifier's first wording,
  and every tool a session may call (the operator's and the on-request ones included,
  read from the butler's own listing) as the butlers declare them, no cache marks;
- all tools: compact definitions, but every session tool offered with every request
  (no operator or on-request tiers) and the classifier's first wording.

Tokens are an estimate: UTF-8 bytes / 4, OpenAI's rule of thumb (no tokenizer of a
hosted model family runs offline here; JSON schemas tokenise a little denser, so
absolute figures are approximate and the ratios are what to read). Billed-equivalent
tokens price Anthropic's prompt cache: the cached prefix (tools and system, when at
least the model's minimum of 1,024 tokens) read at a tenth with a warm cache; with a
cold cache the session's first request writes it at 1.25 and the later ones read it.
Dollars use the shipped price table (claude-sonnet-4-5), warm. Goal for "Log my
weight: 80kg": at most 2,500 input tokens and 1,000 billed-equivalent (warm).
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT, scripted_ecosystem, user_client
from butlers.llm.anthropic import anthropic_prefix, to_anthropic_messages
from butlers.llm.offer import LOAD_TOOLS
from butlers.llm.openai import to_openai_messages, to_openai_tools
from butlers.llm.types import ToolSpec
from butlers.pricing import price_for
from butlers.roster import load_roster
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import ScriptServer, call, step

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from scenarios import SCENARIOS

BYTES_PER_TOKEN = 4
MIN_CACHED_PREFIX = 1024  # tokens: Anthropic caches no shorter prefix (Sonnet, Opus)
CACHE_READ_SHARE = 0.1
CACHE_WRITE_SHARE = 1.25
PRICED_AS = "claude-sonnet-4-5"
WEIGHT = "Log my weight: 80kg"
WEIGHT_SCRIPT = {
    "health": [
        step(tool_calls=[call("measurement_log", type="weight", value=80, unit="kg")]),
        step("Logged your weight: 80 kg."),
    ]
}
TARGETS = ("general", "health", "relationship")


def tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


def start_classification_prompt(text: str) -> str:
    """The classifier's request as it was worded at the start of this work."""
    lines = ["Route the user's message to the butlers that should handle it.", "Butlers:"]
    for resource in sorted(load_roster(ROOT / "roster"), key=lambda r: r.name):
        if resource.name not in TARGETS:
            continue
        hints = resource.spec.routing.hints
        handles = f" (handles: {'; '.join(hints)})" if hints else ""
        lines.append(f"- {resource.name}: {resource.spec.description}{handles}")
    lines += [
        "",
        "Answer with only a JSON array. Each element is an object with:",
        '  "butler": one of the names above;',
        '  "prompt": a self-contained instruction for that butler, with every detail it',
        "            needs from the message (names, numbers, dates, units);",
        '  "segment": the part of the message this element covers, quoted exactly.',
        "Split a message that concerns several butlers into one element per butler.",
        "If no butler fits, use 'general'.",
        "",
        "Message:",
        text,
    ]
    return "\n".join(lines)


@dataclass
class Figures:
    input: int = 0
    billed: float = 0.0
    cold: float = 0.0
    output: int = 0

    def dollars(self) -> float:
        price = price_for(PRICED_AS)
        assert price is not None
        return (self.billed * price.input_per_mtok + self.output * price.output_per_mtok) / 1e6


def openai_tokens(system: str, messages: list[Any], tools: list[ToolSpec], compact: bool) -> int:
    wire: dict[str, Any] = {"messages": to_openai_messages(system, messages)}
    if tools:
        wire["tools"] = to_openai_tools(tools, compact=compact)
    return tokens(wire)


def anthropic_figures(
    system: str, messages: list[Any], tools: list[ToolSpec], first: bool
) -> tuple[int, float, float]:
    """(input tokens, billed-equivalent warm, billed-equivalent cold) of one request;
    `first`: the session's first request (with a cold cache, it writes the prefix)."""
    prefix = anthropic_prefix(system, tools)
    stable = tokens(prefix.get("tools") or []) + tokens(prefix.get("system") or "")
    rest = tokens(to_anthropic_messages(messages))
    total = stable + rest
    if stable < MIN_CACHED_PREFIX:
        return total, float(total), float(total)
    cold = CACHE_WRITE_SHARE if first else CACHE_READ_SHARE
    return total, rest + stable * CACHE_READ_SHARE, rest + stable * cold


def script_message(server: ScriptServer, butler: str, text: str, steps: list[Any]) -> None:
    entries = [{"butler": butler, "prompt": text, "segment": text}]
    server.script.route("switchboard", step(json.dumps(entries)))
    server.script.route(butler, *steps)


def spec(tool: Any) -> ToolSpec:
    return ToolSpec(tool.name, tool.description or "", dict(tool.input_schema or {}))


async def session_tools(eco: Any, butler: str) -> tuple[dict[str, ToolSpec], set[str]]:
    """Every tool of `butler` by name (as its owner lists them), and its operator's tools."""
    async with user_client(eco, butler) as client:
        listed = await client.list_tools()
    operator = {t.name for t in listed if (t.meta or {}).get("operator")}
    return {t.name: spec(t) for t in listed}, operator


def every_session_tool(
    request: dict[str, Any], tools: dict[str, ToolSpec], operator: set[str]
) -> list[ToolSpec]:
    """The tools a request would carry with no tiers: what it was sent, what its loader
    offered, and the operator's tools (which sessions were offered before)."""
    names = [t["name"] for t in request["tools"] if t["name"] != LOAD_TOOLS]
    for t in request["tools"]:
        if t["name"] == LOAD_TOOLS:
            names += t["input_schema"]["properties"]["names"]["items"]["enum"]
    names += sorted(operator - set(names))
    return [tools[n] for n in dict.fromkeys(names)]


async def measure() -> list[tuple[str, Figures, Figures, Figures, Figures]]:
    messages = [(WEIGHT, "health", WEIGHT_SCRIPT["health"])]
    for scenario in SCENARIOS:
        steps = scenario.script.get(scenario.expected_butler)
        if steps and not scenario.skip_reason:
            messages.append((scenario.input_prompt, scenario.expected_butler, steps))
    results = []
    async with scripted_ecosystem() as (scripts, eco):
        listings = {name: await session_tools(eco, name) for name in TARGETS}
        async with user_client(eco, "switchboard") as client:
            for text, butler, steps in messages:
                before = len(scripts.script.requests)
                script_message(scripts, butler, text, steps)
                envelope = json.loads(build_envelope(text).model_dump_json())
                await client.call_tool("ingest_v1", {"envelope": envelope, "wait": True})
                requests = scripts.script.requests[before:]
                results.append((text, *figures(requests, text, listings)))
    return results


def figures(
    requests: list[dict[str, Any]], text: str, listings: dict[str, Any]
) -> tuple[Figures, Figures, Figures, Figures]:
    """(start, all tools, now on the OpenAI wire, now on the Anthropic wire)."""
    start, every, openai_now, anthropic_now = Figures(), Figures(), Figures(), Figures()
    sessions: set[str] = set()
    for request in requests:
        request.setdefault("tools", [])
        system, sent = request["system"], request["messages"]
        tools = [ToolSpec(t["name"], t["description"], t["input_schema"]) for t in request["tools"]]
        if request["butler"] == "switchboard":
            first_wording = [{"role": "user", "content": start_classification_prompt(text)}]
            start.input += openai_tokens(system, first_wording, [], compact=False)
            every.input += openai_tokens(system, first_wording, [], compact=True)
            every_sent, all_tools = first_wording, []
        else:
            every_sent, all_tools = sent, every_session_tool(request, *listings[request["butler"]])
            start.input += openai_tokens(system, sent, all_tools, compact=False)
            every.input += openai_tokens(system, sent, all_tools, compact=True)
        openai_now.input += openai_tokens(system, sent, tools, compact=True)
        first = request["session_id"] not in sessions
        sessions.add(request["session_id"])
        _, every_billed, every_cold = anthropic_figures(system, every_sent, all_tools, first)
        every.billed += every_billed
        every.cold += every_cold
        total, billed, cold = anthropic_figures(system, sent, tools, first)
        anthropic_now.input += total
        anthropic_now.billed += billed
        anthropic_now.cold += cold
        for figure in (start, every, openai_now, anthropic_now):
            figure.output += 20  # a short answer or one tool call
    start.billed = start.cold = start.input
    return start, every, openai_now, anthropic_now


async def main() -> None:
    results = await measure()
    print("tokens per message (estimate: UTF-8 bytes / 4), scripted model, butlers as processes")
    print(
        f"input on the OpenAI wire; billed-equivalent on Anthropic's: reads at "
        f"{CACHE_READ_SHARE:g}, writes at {CACHE_WRITE_SHARE:g}; $ at {PRICED_AS} (warm)"
    )
    print("input: start / all tools / now; billed: all tools warm and cold / now warm and cold")
    print(
        f"{'message':34} {'start':>5} {'all':>5} {'now':>5} {'ratio':>5} "
        f"{'all w':>5} {'all c':>5} {'now w':>5} {'now c':>5} {'ratio':>5} "
        f"{'$ start':>7} {'$ now':>7}"
    )
    for text, start, every, openai_now, anthropic_now in results:
        print(
            f"{text[:34]:34} {start.input:5d} {every.input:5d} {openai_now.input:5d} "
            f"{openai_now.input / start.input:5.2f} {every.billed:5.0f} {every.cold:5.0f} "
            f"{anthropic_now.billed:5.0f} {anthropic_now.cold:5.0f} "
            f"{anthropic_now.billed / start.billed:5.2f} "
            f"{start.dollars():7.4f} {anthropic_now.dollars():7.4f}"
        )
    weight = results[0]
    met_input = weight[3].input <= 2500
    met_billed = weight[4].billed <= 1000
    print(
        f"goal for {WEIGHT!r}: input {weight[3].input} <= 2500 "
        f"({'met' if met_input else 'not met'}), billed-equivalent {weight[4].billed:.0f} "
        f"<= 1000 ({'met' if met_billed else 'not met'})"
    )


if __name__ == "__main__":
    asyncio.run(main())
