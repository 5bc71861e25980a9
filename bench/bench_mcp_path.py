"""Where a `tools/call` spends its time: the butler against the transport floor, per client.

One butler (`health`, a real `butlers serve` process) and a floor server (`_floor_server.py`:
uvicorn + httptools answering the same asyncpg query as `state_get`, on the same event
loop) run side by side. Every configuration makes `state_get` calls in blocks of BLOCK
calls; each round runs a floor block before every other configuration's block (those
in a new random order every round), so every block follows a block of the *other*
server: N rounds per repeat, 3 repeats. Per repeat each configuration's median; printed:
the median over repeats and their spread (min-max).

- warm: the calls of a block after its first (a server answering a steady stream);
- cold: the first call of a block, right after the other server answered (a server that
  sat idle for one call). A server's first call after another process served costs
  it ~0.1 ms more, the floor as much as the butler: the benchmark compares like with
  like (warm with warm, cold with cold) and never a first call with a later one. (It
  once rotated the configurations call by call, so the same configuration always
  followed the floor and paid that: the 2025 session looked 0.1 ms slower than the
  2026 request; it is not.)

- `floor / bare`: the bare client (`_bare_http.py`: one keep-alive connection, raw bytes)
  against the floor server: the baseline of every ratio.
- `butler / bare 2025`: the same bare client, `tools/call` in a 2025-11-25 session.
- `butler / bare 2026`: the same, a stateless 2026-07-28 request (no session).
- `butler / lean`: our own client (the one the switchboard, the dashboard and the CLI use).
- `butler / fastmcp`: FastMCP's `Client` over streamable HTTP.

`--against REVISION` (e.g. `main`, a commit) adds the same butler (same spec, schema and
credentials, other ports) served twice more, each as a `butlers serve` process of its
own: by this tree's `src/` (`tree`) and by that revision's (`REVISION`), with the bare
client, 2025 and 2026: a before/after within one run (compare those two rows with each
other: a process of its own is ~0.08 ms slower on a cold call than a child of the
ecosystem's fork server).

server/floor = butler with the bare client / floor with the bare client, warm and cold
(goal <= 1.5);
client cost = butler with that client - butler with the bare client (goal, lean: <= 0.5 ms).
Timing is never a failure: this prints, and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx

from _bare_http import BareHttp
from _common import ROOT, ecosystem, user_client
from butlers.db.embedded import free_port
from butlers.ecosystem.supervisor import ButlerProcess, Ecosystem
from tests.support import raw_mcp

N = int(os.environ.get("BENCH_MCP_N", "400"))
REPEATS = 3
BLOCK = 4  # calls per block: the first is cold, the rest warm
WARMUP = 100
HERE = Path(__file__).resolve().parent
SESSION_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
# Every server in a session of its own, as the ecosystem's butler is (its own `setsid`):
# with the kernel's autogroup scheduling a process shares its CPU share with the rest of
# its session, so a server in the client's session is scheduled unlike one outside it.
SESSIONS = os.environ.get("BENCH_MCP_SESSIONS", "1") != "0"
# Butlers log at the level users run them at (INFO: a line per tool call): the
# ecosystem's to files, as under `butlers up`, a lone `butlers serve` to stderr, as in a
# pod; BENCH_MCP_LOG_LEVEL=WARNING measures them without that line (the figures until
# issue 14's third stop).
LOG_LEVEL = os.environ.get("BENCH_MCP_LOG_LEVEL", "INFO").upper()
FLOOR = "floor / bare"


def _call_body(ident: int, meta: dict[str, object] | None = None) -> bytes:
    params: dict[str, object] = {"name": "state_get", "arguments": {"key": "bench"}}
    if meta is not None:
        params["_meta"] = meta
    return json.dumps(
        {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
    ).encode()


async def _open_session(url: str, token: str) -> str:
    """A 2025-11-25 MCP session (initialize + initialized); its id."""
    async with httpx.AsyncClient(timeout=10) as http:
        return await raw_mcp.open_session(http, url, token, SESSION_VERSION)


async def _wait_port(port: int, deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > end:
                raise RuntimeError(f"the floor server did not listen on {port}") from None
            await asyncio.sleep(0.05)


def _against() -> str | None:
    args = sys.argv[1:]
    if not args:
        return None
    if len(args) == 2 and args[0] == "--against":
        return args[1]
    raise SystemExit("usage: bench_mcp_path.py [--against REVISION]")


def _export_src(revision: str, into: Path) -> Path:
    """`src/` of `revision` (of this repository), unpacked under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {revision}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def _serve_revision(
    src: Path, eco: Ecosystem, butler: ButlerProcess, port: int, log_file: Path
) -> Any:
    """The same butler (spec, schema, credentials) served by the code under `src`, as a
    pod serves it (its log on stderr, into `log_file`)."""
    assert eco.tokens is not None
    env = {k: v for k, v in os.environ.items() if k in butler.plan.variables}
    env |= eco.tokens.butler_env(butler.name, None)
    env |= {
        "BUTLERS_DSN": butler.dsn,
        "BUTLERS_SCHEMA": butler.schema,
        "BUTLERS_HOST": "127.0.0.1",
        "BUTLERS_LOG_LEVEL": LOG_LEVEL,
        "BUTLERS_PARENT_PID": str(os.getpid()),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(src),
    }
    code = (
        "import sys; from pathlib import Path; from butlers.daemon.serve import run; "
        "sys.exit(run(Path(sys.argv[1]), port=int(sys.argv[2])))"
    )
    command = [sys.executable, "-c", code, str(butler.spec_path), str(port)]
    # As in a pod: the log on stderr, which the runtime (here a file) takes.
    with log_file.open("ab") as log:
        return subprocess.Popen(
            command, env=env, stdout=log, stderr=log, start_new_session=SESSIONS
        )


def _bare_pair(url: str, token: str, session_id: str) -> tuple[BareHttp, BareHttp]:
    """The bare client in a 2025-11-25 session, and as stateless 2026-07-28 requests."""
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT,
        "Authorization": f"Bearer {token}",
    }
    session = BareHttp(
        url,
        {**headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": SESSION_VERSION},
        _call_body(1),
    )
    modern_meta: dict[str, object] = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    modern = BareHttp(
        url,
        {
            **headers,
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "state_get",
        },
        _call_body(1, modern_meta),
    )
    return session, modern


def _lean_client(
    token: str,
) -> tuple[Callable[[str], Awaitable[object]], Callable[[], Awaitable[None]]]:
    """(call, close) of our own lean client: the consolidated one when it exists."""
    try:
        from butlers.mcp_clients import McpClient

        lean = McpClient({"Authorization": f"Bearer {token}"})

        async def call(url: str) -> object:
            return await lean.call_tool(url, "state_get", {"key": "bench"})

        return call, lean.aclose
    except ImportError:  # before the one client (the baseline): the dashboard's
        from butlers.dashboard.mcp_http import McpHttpClient  # type: ignore[import-not-found]

        old = McpHttpClient({"Authorization": f"Bearer {token}"})

        async def call_old(url: str) -> object:
            return await old.call_tool(url, "state_get", {"key": "bench"})

        return call_old, old.aclose


async def main() -> None:
    revision = _against()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        # Both served the same way (a `butlers serve` process of its own, not a child of
        # the ecosystem's fork server, which is faster on a cold call by ~0.08 ms).
        sources: dict[str, Path] = {}
        if revision is not None:
            sources = {"tree": ROOT / "src", revision: _export_src(revision, Path(tmp))}
        await _main(sources)


async def _main(sources: dict[str, Path]) -> None:
    async with ecosystem(["health"], log_level=LOG_LEVEL) as eco:
        butler = eco.butlers["health"]
        assert eco.tokens is not None
        token = eco.tokens.user_token
        url = butler.url
        port = free_port()
        floor_proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before timing)
            [sys.executable, str(HERE / "_floor_server.py"), butler.dsn, butler.schema, str(port)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            start_new_session=SESSIONS,
        )
        ports = {label: free_port() for label in sources}
        served = {
            label: _serve_revision(
                src, eco, butler, ports[label], eco.settings.data_dir / f"bench-{label}.log"
            )
            for label, src in sources.items()
        }
        closers: list[Callable[[], Awaitable[object]]] = []
        try:
            await _wait_port(port)
            for label in served:
                await _wait_port(ports[label])
            async with user_client(eco, "health") as fast:
                await fast.call_tool("state_set", {"key": "bench", "value": {"weight": 80}})
                session_id = await _open_session(url, token)
                json_headers = {"Content-Type": "application/json", "Accept": ACCEPT}
                floor = BareHttp(f"http://127.0.0.1:{port}/", json_headers, _call_body(1))
                bare_session, bare_modern = _bare_pair(url, token, session_id)
                pairs: dict[str, tuple[BareHttp, BareHttp]] = {}
                for label in served:
                    other_url = f"http://127.0.0.1:{ports[label]}/mcp"
                    other_session = await _open_session(other_url, token)
                    pairs[label] = _bare_pair(other_url, token, other_session)
                served_bare = [bare for pair in pairs.values() for bare in pair]
                for bare in (floor, bare_session, bare_modern, *served_bare):
                    await bare.open()
                    closers.append(bare.close)
                lean_call, lean_close = _lean_client(token)
                closers.append(lean_close)

                async def fastmcp_call() -> object:
                    return await fast.call_tool("state_get", {"key": "bench"})

                configs: dict[str, Callable[[], Awaitable[object]]] = {
                    "floor / bare": floor.call,
                    "butler / bare 2025": bare_session.call,
                    "butler / bare 2026": bare_modern.call,
                    "butler / lean": lambda: lean_call(url),
                    "butler / fastmcp": fastmcp_call,
                }
                for label, (session_call, modern_call) in pairs.items():
                    configs[f"{label} / bare 2025"] = session_call.call
                    configs[f"{label} / bare 2026"] = modern_call.call
                for name, fn in configs.items():  # each answers, and is warm
                    for _ in range(WARMUP):
                        answer = await fn()
                    if isinstance(answer, bytes) and b'"error"' in answer:
                        raise RuntimeError(f"{name}: {answer[:300]!r}")
                if os.environ.get("BENCH_MCP_PIDS"):  # for a profiler: who serves what
                    assert butler.process is not None
                    pids = f"butler {butler.process.pid}\nfloor {floor_proc.pid}\n"
                    Path(os.environ["BENCH_MCP_PIDS"]).write_text(pids)  # noqa: ASYNC240
                medians = await _measure(configs)
                assert butler.process is not None
                cpu = {
                    "floor / bare": await _cpu_per_call(floor_proc.pid, floor),
                    "butler / bare 2025": await _cpu_per_call(butler.process.pid, bare_session),
                    "butler / bare 2026": await _cpu_per_call(butler.process.pid, bare_modern),
                }
                for label, (session_call, modern_call) in pairs.items():
                    pid = served[label].pid
                    cpu[f"{label} / bare 2025"] = await _cpu_per_call(pid, session_call)
                    cpu[f"{label} / bare 2026"] = await _cpu_per_call(pid, modern_call)
        finally:
            for close in closers:
                await close()
            floor_proc.terminate()
            floor_proc.wait(10)
            for process in served.values():
                process.terminate()
                process.wait(10)
    _report(medians)
    print(
        "server CPU per call (user+system of the serving process, one client at a time): "
        + ", ".join(
            f"{name} {us:.0f} us ({us / cpu['floor / bare']:.2f}x)" for name, us in cpu.items()
        )
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _cpu_per_call(pid: int, bare: BareHttp) -> float:
    """Microseconds of the server's CPU per call (clock ticks: needs many calls)."""
    calls = max(N * 5, 2000)
    await bare.close()
    await bare.open()  # idle for a while: the server may have closed the old connection
    before = _cpu_seconds(pid)
    for _ in range(calls):
        await bare.call()
    return (_cpu_seconds(pid) - before) / calls * 1e6


async def _measure(
    configs: dict[str, Callable[[], Awaitable[object]]],
) -> dict[str, dict[str, list[float]]]:
    """{"warm"|"cold": {configuration: per-repeat medians in ms}}: blocks of BLOCK calls,
    a floor block before every other block, the others in a new order every round."""
    others = [name for name in configs if name != FLOOR]
    # A new order every round: a rotation keeps each configuration after the same one,
    # and what a call leaves behind (FastMCP's client keeps working after its call
    # returns) would always land on the same neighbour.
    order = random.Random(14)
    medians: dict[str, dict[str, list[float]]] = {
        kind: {name: [] for name in configs} for kind in ("warm", "cold")
    }
    for _ in range(REPEATS):
        samples: dict[str, dict[str, list[float]]] = {
            kind: {name: [] for name in configs} for kind in ("warm", "cold")
        }
        for _ in range(N):
            order.shuffle(others)
            for other in others:
                for name in (FLOOR, other):
                    fn = configs[name]
                    for call in range(BLOCK):
                        started = time.perf_counter()
                        await fn()
                        took = time.perf_counter() - started
                        samples["cold" if call == 0 else "warm"][name].append(took)
        for kind, by_name in samples.items():
            for name, values in by_name.items():
                medians[kind][name].append(statistics.median(values) * 1000)
    return medians


def _report(medians: dict[str, dict[str, list[float]]]) -> None:
    print(
        f"tools/call state_get: butler vs transport floor, interleaved blocks of {BLOCK} "
        f"calls, n={N} rounds x {REPEATS} repeats (median of repeat medians, spread min-max); "
        f"butlers log at {LOG_LEVEL}"
    )
    for kind, label in (
        ("warm", "warm: the calls of a block after its first"),
        ("cold", "cold: the first call of a block, after the other server answered"),
    ):
        by_name = medians[kind]
        floor = by_name[FLOOR]
        bare = by_name["butler / bare 2025"]
        print(label)
        print(
            f"{'configuration':<20} {'p50 ms':>8} {'spread':>15} {'/floor':>7} "
            f"{'spread':>13} {'client ms':>10}"
        )
        for name, values in by_name.items():
            ratios = [v / f for v, f in zip(values, floor, strict=True)]
            line = (
                f"{name:<20} {statistics.median(values):>8.3f} "
                f"{min(values):>7.3f}-{max(values):<7.3f} {statistics.median(ratios):>7.2f} "
                f"{min(ratios):>6.2f}-{max(ratios):<6.2f}"
            )
            if name in ("butler / lean", "butler / fastmcp"):
                costs = [v - b for v, b in zip(values, bare, strict=True)]
                line += f" {statistics.median(costs):>+10.3f}"
            print(line)
    print("goals: butler / bare <= 1.5x floor; lean client cost <= 0.5 ms per call")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as exc:  # a benchmark reports, never fails the build
        print(f"bench_mcp_path: could not complete: {exc.__class__.__name__}: {exc}")
    sys.exit(0)
