"""Full pipeline overhead with the scripted runtime: ingest → classify → dispatch →
target session with one tool call → rows, for 1, 2 and 3 targets per message.

Butlers run as separate processes (as under `butlers up`); the scripted model
answers from this process. Baseline in the same run: a bare `state_set` over the
same persistent MCP client to the switchboard. Goal: p50 <= 100 ms for one target.
"""

from __future__ import annotations

import asyncio
import json
import os

from _common import scripted_pipeline, summary
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import ScriptServer, call, step

N = int(os.environ.get("BENCH_ITERATIONS", "60"))
WARMUP = 5
TARGETS = [
    ("health", call("measurement_log", type="weight", value=80, unit="kg")),
    ("relationship", {"name": "contact_add", "arguments": {"name": "Sarah Johnson"}}),
    ("general", call("note_add", title="buy milk")),
]


def script_message(server: ScriptServer, targets: int) -> None:
    chosen = TARGETS[:targets]
    entries = [{"butler": b, "prompt": f"do it for {b}", "segment": b} for b, _ in chosen]
    server.script.route("switchboard", step(json.dumps(entries)))
    for butler, tool_call in chosen:
        server.script.route(butler, step(tool_calls=[tool_call]), step("done"))


async def main() -> None:
    async with scripted_pipeline() as (scripts, client):

        async def state_set() -> None:
            await client.call_tool("state_set", {"key": "bench", "value": 1})

        baseline = []
        for i in range(WARMUP + N):
            start = asyncio.get_running_loop().time()
            await state_set()
            if i >= WARMUP:
                baseline.append(asyncio.get_running_loop().time() - start)
        base = summary(baseline)
        print(f"pipeline overhead, scripted model, butlers as processes, n={N}")
        print(f"baseline: state_set over MCP p50 {base['p50']:.2f} ms p99 {base['p99']:.2f} ms")
        first = None
        for targets in (1, 2, 3):
            samples = []
            for i in range(WARMUP + N):
                script_message(scripts, targets)
                envelope = build_envelope(f"message {targets}-{i}").model_dump(mode="json")
                start = asyncio.get_running_loop().time()
                result = await client.call_tool("ingest_v1", {"envelope": envelope, "wait": True})
                elapsed = asyncio.get_running_loop().time() - start
                assert result.data["fanout_status"] == "completed", result.data
                if i >= WARMUP:
                    samples.append(elapsed)
            s = summary(samples)
            first = first or s["p50"]
            goal = " (goal <= 100 ms: " + ("met)" if s["p50"] <= 100 else "NOT met)")
            print(
                f"{targets} target(s): p50 {s['p50']:.1f} ms p99 {s['p99']:.1f} ms; "
                f"{s['p50'] / base['p50']:.1f}x baseline, "
                f"{s['p50'] / first:.2f}x one target" + (goal if targets == 1 else "")
            )
        problems = scripts.script.check()
        if problems:
            print("script problems:", problems)


if __name__ == "__main__":
    asyncio.run(main())
