"""The pipeline under load: ingest → classify → dispatch → target session → rows, with
10 messages in flight versus one at a time (issue 14, item 5).

Butlers run as processes (as under `butlers up`); the scripted model answers from this
process after MODEL_DELAY per reply (a stand-in for a model's latency, so that waiting
in a queue shows). Each message goes to one of three target butlers in turn. Printed,
paired and repeated (REPEATS rounds, median and spread):

- one at a time vs 10 in flight: wall time, throughput, per-message p50/p99;
- isolation: a message to `general` alone vs while `health` has a queue of slow
  sessions (one butler's queue must not delay another's).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import uuid

from _common import percentile, scripted_pipeline
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import ScriptServer, call, step

IN_FLIGHT = int(os.environ.get("BENCH_IN_FLIGHT", "10"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
MODEL_DELAY = float(os.environ.get("BENCH_MODEL_DELAY", "0.05"))
SLOW_DELAY = 1.0
TARGETS = [
    ("health", call("measurement_log", type="weight", value=80, unit="kg")),
    ("relationship", {"name": "contact_add", "arguments": {"name": "Load Test"}}),
    ("general", call("note_add", title="load test")),
]


def script_one(server: ScriptServer, butler: str, tool: dict[str, object], delay: float) -> str:
    """Steps for one message to `butler`, matched by a marker only that message carries."""
    marker = f"m{uuid.uuid4().hex[:10]}"
    entry = [{"butler": butler, "prompt": f"do {marker}", "segment": marker}]
    server.script.route("switchboard", step(json.dumps(entry), delay=MODEL_DELAY), when=marker)
    server.script.route(
        butler,
        step(tool_calls=[tool], delay=delay),
        step("done", delay=delay),
        when=marker,
    )
    return marker


async def send(client, marker: str) -> float:  # type: ignore[no-untyped-def]
    envelope = build_envelope(f"please {marker}").model_dump(mode="json")
    start = time.perf_counter()
    result = await client.call_tool("ingest_v1", {"envelope": envelope, "wait": True})
    elapsed = time.perf_counter() - start
    assert result.data["fanout_status"] == "completed", result.data
    return elapsed


async def sequential(client, server: ScriptServer, n: int) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    markers = [script_one(server, *TARGETS[i % 3], MODEL_DELAY) for i in range(n)]
    start = time.perf_counter()
    latencies = [await send(client, m) for m in markers]
    return time.perf_counter() - start, latencies


async def concurrent(client, server: ScriptServer, n: int) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    markers = [script_one(server, *TARGETS[i % 3], MODEL_DELAY) for i in range(n)]
    start = time.perf_counter()
    latencies = await asyncio.gather(*(send(client, m) for m in markers))
    return time.perf_counter() - start, list(latencies)


async def isolation(client, server: ScriptServer) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """`general`'s latency alone, then while 3 slow sessions queue on `health`."""
    alone = await send(client, script_one(server, *TARGETS[2], MODEL_DELAY))
    slow = [script_one(server, *TARGETS[0], SLOW_DELAY) for _ in range(3)]
    busy = [asyncio.create_task(send(client, m)) for m in slow]
    await asyncio.sleep(0.3)  # health's queue is full of slow sessions by now
    beside = await send(client, script_one(server, *TARGETS[2], MODEL_DELAY))
    await asyncio.gather(*busy)
    return alone, beside


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


async def main() -> None:
    rows: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rows.setdefault(key, []).append(value)

    async with scripted_pipeline(timeout=120) as (scripts, client):
        await sequential(client, scripts, 3)  # warm-up: sessions, pools, clients
        for _ in range(REPEATS):
            wall1, lat1 = await sequential(client, scripts, IN_FLIGHT)
            wall10, lat10 = await concurrent(client, scripts, IN_FLIGHT)
            add("seq_wall", wall1)
            add("seq_tput", IN_FLIGHT / wall1)
            add("seq_p50", statistics.median(lat1) * 1000)
            add("seq_p99", percentile(lat1, 99) * 1000)
            add("con_wall", wall10)
            add("con_tput", IN_FLIGHT / wall10)
            add("con_p50", statistics.median(lat10) * 1000)
            add("con_p99", percentile(lat10, 99) * 1000)
            add("speedup", wall1 / wall10)
            alone, beside = await isolation(client, scripts)
            add("alone", alone * 1000)
            add("beside", beside * 1000)
            add("iso_ratio", beside / alone)
        problems = scripts.script.check()
    print(
        f"pipeline under load: {IN_FLIGHT} messages, scripted model {MODEL_DELAY * 1000:.0f} ms "
        f"per reply, 3 target butlers in turn; {REPEATS} rounds (median [min–max])"
    )
    print(f"{'':24}{'one at a time':>26}{f'{IN_FLIGHT} in flight':>26}")
    print(f"{'wall (s)':24}{spread(rows['seq_wall']):>26}{spread(rows['con_wall']):>26}")
    print(f"{'throughput (msg/s)':24}{spread(rows['seq_tput']):>26}{spread(rows['con_tput']):>26}")
    print(f"{'latency p50 (ms)':24}{spread(rows['seq_p50']):>26}{spread(rows['con_p50']):>26}")
    print(f"{'latency p99 (ms)':24}{spread(rows['seq_p99']):>26}{spread(rows['con_p99']):>26}")
    print(f"throughput ratio (in flight / one at a time): {spread(rows['speedup'])}x")
    print(
        f"isolation: general alone {spread(rows['alone'])} ms; beside 3 slow health sessions "
        f"({SLOW_DELAY:.0f} s per reply) {spread(rows['beside'])} ms; "
        f"ratio {spread(rows['iso_ratio'])}x"
    )
    if problems:
        print("script problems:", problems)


if __name__ == "__main__":
    asyncio.run(main())
