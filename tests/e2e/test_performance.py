"""The performance domain of document 000: latency budgets and cost per message.

The budgets are generous on purpose (a direct tool call within 1 s, classification
within 10 s, the whole pipeline within 120 s): they catch hangs and runaway work, not
noise on a busy machine. Cost: the scripted model reports tokens measured from what it
was sent (`usage="measured"`) at the price the e2e ecosystem gives it, so a prompt that
grows from one message to the next shows up as a growing cost.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from butlers.modules.memory.recall import HEADER as RECALL
from butlers.testing.script_server import Script, call, measured_usage, step

from .harness.ecosystem import EcosystemHandle
from .harness.env import SCRIPTED_PRICE, scripted_cost
from .test_switchboard_flow import classify_as, ingest

DIRECT_CALL_BUDGET = 1.0
CLASSIFICATION_BUDGET = 10.0
PIPELINE_BUDGET = 120.0
MESSAGES = 5
MAX_COST_PER_MESSAGE = 0.02  # USD, seed 000
TOKEN_SLACK = 2  # measured tokens that may differ between alike messages (formatting)
RECALL_BUDGET = 750  # the memory module's default recallTokens (600) measured as JSON (escapes)


def _recalled(request: dict[str, Any]) -> int:
    """Measured input tokens of a request's memory recall block."""
    return measured_usage(request, {})["input_tokens"] - _without_recall(request)


def _without_recall(request: dict[str, Any]) -> int:
    """Measured input tokens of a request without the memory recall block: recall is
    bounded by its budget and depends on the request's words, not on history."""
    messages = [dict(m) for m in request.get("messages") or []]
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and RECALL in content:
            message["content"] = content.split(RECALL)[0].rstrip()
    return measured_usage({**request, "messages": messages}, {})["input_tokens"]


def _weight_message(script: Script, value: str, *, usage: Any = None) -> str:
    """Script one weight message through the whole pipeline; returns its text."""
    text = f"Log my weight: {value}kg"
    script.route(
        "switchboard",
        {**classify_as(("health", f"Log weight {value} kg", text)), **_usage(usage)},
        when=text,
    )
    script.route(
        "health",
        step(
            tool_calls=[call("measurement_log", type="weight", value=float(value), unit="kg")],
            usage=usage,
        ),
        step(f"Logged {value} kg.", usage=usage),
        when=f"Log weight {value} kg",
    )
    return text


def _usage(usage: Any) -> dict[str, Any]:
    return {} if usage is None else {"usage": usage}


async def test_direct_tool_call_is_within_one_second(butler_ecosystem: EcosystemHandle) -> None:
    await butler_ecosystem.call("health", "state_set", {"key": "e2e-perf", "value": 1})
    slowest = 0.0
    for _ in range(20):
        started = time.monotonic()
        assert await butler_ecosystem.call("health", "state_get", {"key": "e2e-perf"}) == 1
        slowest = max(slowest, time.monotonic() - started)
    assert slowest <= DIRECT_CALL_BUDGET, f"slowest state_get took {slowest:.2f} s"


async def test_classification_is_within_ten_seconds(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    llm_script.route("switchboard", classify_as(("health", "Log weight 71.5 kg", "71.5kg")))
    started = time.monotonic()
    async with asyncio.timeout(CLASSIFICATION_BUDGET + 5):
        result = await butler_ecosystem.call(
            "switchboard", "classify_message", {"text": "Log my weight: 71.5kg"}
        )
    elapsed = time.monotonic() - started
    assert result["fallback"] is False and result["entries"][0]["butler"] == "health"
    assert elapsed <= CLASSIFICATION_BUDGET, f"classification took {elapsed:.2f} s"
    pool = await butler_ecosystem.pool("switchboard")
    duration = await pool.fetchval(
        "SELECT duration_ms FROM sessions WHERE trigger_source = 'classify' "
        "ORDER BY created_at DESC LIMIT 1"
    )
    assert duration <= CLASSIFICATION_BUDGET * 1000


async def test_whole_pipeline_is_within_120_seconds(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    text = _weight_message(llm_script, "71.6")
    started = time.monotonic()
    try:
        async with asyncio.timeout(PIPELINE_BUDGET):
            answer = await ingest(butler_ecosystem, text)
    except TimeoutError:
        pytest.fail(f"the pipeline did not finish within {PIPELINE_BUDGET:g} s")
    elapsed = time.monotonic() - started
    assert isinstance(answer, dict) and "routes" in answer, (
        f"ingest_v1 answered {answer!r} after {elapsed:.0f} s"
    )
    [route] = answer["routes"]
    assert (route["butler"], route["status"], route["tool_calls"]) == (
        "health",
        "success",
        ["measurement_log"],
    )
    assert elapsed <= PIPELINE_BUDGET


async def test_cost_per_message_is_flat_over_n_messages(
    butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    """Five alike messages (same length), one after another: each one's sessions are
    sent as many tokens as the first one's (no prompt grows with history, a few tokens
    of slack for formatting), every session row costs its tokens at the configured
    price, a message costs the same as the first but for what memory recalled for it
    (which depends on the words, and is bounded by the recall budget), and a message
    costs less than $0.02."""
    switchboard = await butler_ecosystem.pool("switchboard")
    health = await butler_ecosystem.pool("health")
    per_message, recalled = [], []
    sent: list[tuple[int, int]] = []  # input tokens of (classification, target) sessions
    for i in range(MESSAGES):
        text = _weight_message(llm_script, f"7{i}.7", usage="measured")
        answer = await ingest(butler_ecosystem, text)
        [route] = answer["routes"]
        assert route["status"] == "success", route
        rows = [
            await switchboard.fetchrow(
                "SELECT input_tokens, output_tokens, cost_usd FROM sessions "
                "WHERE trigger_source = $1",
                f"classify:{answer['request_id']}",
            ),
            await health.fetchrow(
                "SELECT input_tokens, output_tokens, cost_usd FROM sessions "
                "WHERE session_id = $1::uuid",
                route["session_id"],
            ),
        ]
        for row in rows:
            assert row["input_tokens"] > 0 and row["output_tokens"] > 0, dict(row)
            assert float(row["cost_usd"]) == pytest.approx(
                scripted_cost(row["input_tokens"], row["output_tokens"]), abs=1e-9
            )
        per_message.append(sum(float(row["cost_usd"]) for row in rows))
        target = [r for r in llm_script.requests if r.get("session_id") == route["session_id"]]
        assert len(target) == 2, target  # the tool call, then the answer
        sent.append((rows[0]["input_tokens"], sum(_without_recall(r) for r in target)))
        recalled.append([_recalled(r) for r in target])
    for kind, tokens in zip(("classification", "target"), zip(*sent, strict=True), strict=True):
        assert max(tokens) - min(tokens) <= TOKEN_SLACK, f"{kind} sessions were sent {tokens}"
    assert all(0 <= n <= RECALL_BUDGET for ns in recalled for n in ns), recalled
    without = [
        cost - sum(tokens) * SCRIPTED_PRICE[0] / 1e6
        for cost, tokens in zip(per_message, recalled, strict=True)
    ]
    assert all(abs(cost - without[0]) <= 0.01 * without[0] for cost in without), (
        per_message,
        recalled,
    )
    assert max(per_message) < MAX_COST_PER_MESSAGE, per_message
