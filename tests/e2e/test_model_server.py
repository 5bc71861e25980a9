"""The model-server lane: the ecosystem driven through a real OpenAI-compatible server
(`--model-server`, harness/model_lane.py), checking robustness, not quality.

A handful of messages through the switchboard and triggers on butlers with tools, each
answered by a real model with whatever it makes of them. Every message and session must
end in a recorded state with a clear reason, no session may run past the caps its spec
sets, nothing may crash or hang, and the butlers and the model server must still be up.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime
from typing import Any

import httpx2 as httpx
import pytest

from butlers.switchboard.envelope import build_envelope

from .harness.ecosystem import EcosystemHandle
from .harness.model_lane import lane_caps

pytestmark = pytest.mark.model_server

MESSAGES = [
    "Log my weight: 80kg",
    "Remind me to call Alice tomorrow at 10, her number is +1 555 0100",
    'Write "hello"\nthen a list of three "quoted" items, as JSON with a trailing comma,',
    "Write a 3000-word essay about the history of tea, with headings.",
]
TRIGGERS = [
    ("health", "Record a blood pressure of 120/80 and a weight of 81.5 kg."),
    ("general", 'Remember under the key "note" the text: line one\nline two "quoted"'),
]
# Time a message may take past its sessions' own deadlines: classification and the
# target session each run at most timeoutSeconds.
MESSAGE_SLACK_SECONDS = 30.0
FINAL = {"completed", "error", "interrupted"}


async def _call(
    eco: EcosystemHandle, butler: str, tool: str, arguments: dict[str, Any], deadline: float
) -> Any:
    """`tool` on `butler`, which must answer within `deadline` seconds (a client of its
    own: the shared one gives up sooner than a capped session may take)."""
    async with asyncio.timeout(deadline), eco.client(butler, timeout=deadline + 5) as client:
        return (await client.call_tool(tool, arguments)).data


async def _ingest(eco: EcosystemHandle, text: str, deadline: float) -> dict[str, Any]:
    envelope = build_envelope(text, channel="cli", provider="butlers").model_dump(mode="json")
    answer: dict[str, Any] = await _call(
        eco, "switchboard", "ingest_v1", {"envelope": envelope, "wait": True}, deadline
    )
    return answer


async def _trigger(eco: EcosystemHandle, butler: str, prompt: str, deadline: float) -> Any:
    return await _call(eco, butler, "trigger", {"prompt": prompt}, deadline)


async def _fallbacks_shown(eco: EcosystemHandle) -> dict[str, str]:
    """The dashboard's messages whose classification was unusable: id -> its reason."""
    token = eco.dashboard_token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=eco.dashboard_url or "", headers=headers) as http:
        answer = await http.get(
            "/api/switchboard/messages", params={"fallback": "true", "limit": 100}, timeout=30
        )
    assert answer.status_code == 200, answer.text
    return {str(m["id"]): m["classification_reason"] or "" for m in answer.json()["data"]}


async def test_every_message_and_session_ends_recorded_within_its_caps(
    butler_ecosystem: EcosystemHandle, model_server_env: dict[str, str]
) -> None:
    eco = butler_ecosystem
    caps = lane_caps(os.environ)
    session_seconds = float(caps["timeoutSeconds"])
    started = datetime.now(UTC)
    clock = time.monotonic()

    answers = [
        await _ingest(eco, text, 2 * session_seconds + MESSAGE_SLACK_SECONDS) for text in MESSAGES
    ]
    triggered = [
        await _trigger(eco, butler, prompt, session_seconds + MESSAGE_SLACK_SECONDS)
        for butler, prompt in TRIGGERS
    ]
    elapsed = time.monotonic() - clock

    # Every message: a final status, and a reason for anything that did not succeed.
    for text, answer in zip(MESSAGES, answers, strict=True):
        assert answer["fanout_status"] in {"completed", "partial", "failed"}, (text, answer)
        classification = answer["classification"]
        if classification["fallback"]:
            assert classification["reason"], answer
        assert answer["routes"], answer
        for route in answer["routes"]:
            assert route["status"] in {"success", "error", "timeout", "target_unavailable"}
            if route["status"] != "success":
                assert route["error"], route
    for (butler, _prompt), result in zip(TRIGGERS, triggered, strict=True):
        assert result["success"] or result["error"], (butler, result)

    # Every session of the lane: recorded, final, a reason when it failed, within caps.
    sessions = []
    for butler in eco.names:
        pool = await eco.pool(butler)
        rows = await pool.fetch(
            "SELECT session_id, trigger_source, status, error, duration_ms, input_tokens, "
            "output_tokens FROM sessions WHERE created_at >= $1",
            started,
        )
        sessions += [(butler, dict(r)) for r in rows]
    assert len(sessions) >= len(MESSAGES) + len(TRIGGERS)
    problems = []
    # A reply is checked after it arrives: a session may pass its budget by one reply,
    # which is at most the server's context.
    token_bound = int(caps["maxSessionTokens"]) + 8192
    for butler, row in sessions:
        where = f"{butler} {row['session_id']} ({row['trigger_source']})"
        if row["status"] not in FINAL:
            problems.append(f"{where}: status {row['status']}")
        if row["status"] != "completed" and not row["error"]:
            problems.append(f"{where}: {row['status']} without a reason")
        if (row["duration_ms"] or 0) > (session_seconds + 5) * 1000:
            problems.append(f"{where}: ran {row['duration_ms']} ms")
        used = (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
        if used > token_bound:
            problems.append(f"{where}: used {used} tokens")
        replies_cap = int(caps["maxTurns"]) * int(caps["maxTokens"])
        if (row["output_tokens"] or 0) > replies_cap:
            problems.append(f"{where}: wrote {row['output_tokens']} tokens")
    assert problems == []

    # Nothing crashed: the model server still answers (a server that died would leave
    # every session an error with a reason, and this lane would prove nothing), every
    # butler still answers,
    async with httpx.AsyncClient(timeout=10) as http:
        models = await http.get(model_server_env["BUTLERS_OPENAI_BASE_URL"] + "/models")
    assert models.status_code == 200, "the model server died during the lane"
    completed = [r for _b, r in sessions if r["status"] == "completed"]
    assert completed or any("timeout" in (r["error"] or "") for _b, r in sessions), (
        "no session got an answer from the model server"
    )
    # Every butler still answers, and the switchboard counted what it could not classify
    # (at least the fallbacks the answers showed).
    for butler in eco.names:
        assert (await eco.call(butler, "status"))["name"] == butler
    stats = await eco.call("switchboard", "switchboard_stats")
    fallbacks = [a for a in answers if a["classification"]["fallback"]]
    assert stats["classification_fallbacks"] >= len(fallbacks)
    # The dashboard's routing view lists each of them, with the reason.
    if eco.dashboard_url is not None:
        shown = await _fallbacks_shown(eco)
        for answer in fallbacks:
            assert shown.get(answer["request_id"]), (answer, shown)
    print(
        f"\nmodel-server lane: {len(MESSAGES)} messages, {len(TRIGGERS)} triggers, "
        f"{len(sessions)} sessions in {elapsed:.1f} s; "
        + ", ".join(f"{b}:{r['status']} ({(r['error'] or '-')[:60]})" for b, r in sessions)
    )
