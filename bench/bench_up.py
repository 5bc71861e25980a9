"""Cold and warm `butlers up --detach` of the five roster butlers (and the dashboard),
with the supervisor's phases and the idle memory of every process.

Cold: a new data directory (initdb, provisioning, migrations, five processes and the
dashboard). Warm: the same data directory again. Each round runs, interleaved, this
checkout and a baseline (`--baseline REF`, default: where this branch left `main`; its `src/`
exported to a temporary directory and put first on PYTHONPATH, with this checkout's
virtual environment and roster), so both see the same machine load. Repeated
`--repeats` times (default 3); medians and spreads (max - min).

Phases, from the supervisor's log (`logs/supervisor.log`):
- launch: from running `butlers up --detach` to the supervisor starting its work
  (interpreters and imports);
- database, provisioning, migrations: as the supervisor logs them;
- butlers: from migrations at head to every butler's `/ready`;
- rest: until `butlers up --detach` returns (switchboard registrations, the
  dashboard's readiness, the state file).
Memory: RSS and PSS (from /proc/PID/smaps_rollup) of each butler, the dashboard and
the supervisor, 2 s after `up` returned. Prints the load average: on a loaded
machine, compare the two columns of one run, not absolute figures. Goals (issue 14):
cold up <= 3 s on a quiet machine, idle RSS <= 90 MB per butler process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from butlers.db.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("launch", "database", "provisioning", "migrations", "butlers", "rest", "total")
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO .*?: (.*)$")


def export(ref: str, into: Path) -> Path:
    """`ref`'s src/ under `into`, with this checkout's built dashboard assets."""
    archive = subprocess.run(
        ["git", "archive", ref, "src"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    static = ROOT / "src" / "butlers" / "dashboard" / "static"
    if static.is_dir():
        subprocess.run(
            ["cp", "-r", str(static), str(into / "src" / "butlers" / "dashboard")], check=True
        )
    return into / "src"


def butlers(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "butlers", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def phases(log: Path, launched: float, returned: float) -> dict[str, float]:
    """The phases of the last start logged in `log` (wall-clock timestamps, ms)."""
    events: dict[str, tuple[float, str]] = {}
    for line in log.read_text(errors="replace").splitlines():
        match = LINE.match(line)
        if not match:
            continue
        stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for key in ("database ready", "provisioned", "migrations at head", "butlers ready"):
            if match[2].startswith(key):
                events[key] = (stamp, match[2])
    seconds = {k: float(re.findall(r"in ([\d.]+) s", m)[0]) for k, (_, m) in events.items()
               if k != "butlers ready"}  # fmt: skip
    db_at = events["database ready"][0]
    migrated_at = events["migrations at head"][0]
    return {
        "launch": max(0.0, db_at - seconds["database ready"] - launched),
        "database": seconds["database ready"],
        "provisioning": seconds["provisioned"],
        "migrations": seconds["migrations at head"],
        "butlers": events["butlers ready"][0] - migrated_at,
        "rest": returned - events["butlers ready"][0],
        "total": returned - launched,
    }


def memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss"):
            values[name] = int(rest.split()[0]) / 1024
    return values["Rss"], values["Pss"]


def up(env: dict[str, str], data: Path) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    roster = str(ROOT / "roster")
    # A free port for the dashboard: 40200 may be held by closing connections of an
    # earlier run, which `up` waits out (the roster's ports it must use).
    port = str(free_port())
    launched = time.time()
    butlers(
        env, "up", "--data-dir", str(data), "--roster", roster, "--detach",
        "--dashboard-port", port,
    )  # fmt: skip
    returned = time.time()
    time.sleep(2.0)  # idle
    state = json.loads((data / "ecosystem.json").read_text())
    mem = {name: memory(b["pid"]) for name, b in state["butlers"].items()}
    if state.get("dashboard", {}).get("pid"):
        mem["dashboard"] = memory(state["dashboard"]["pid"])
    mem["supervisor"] = memory(state["supervisor_pid"])
    result = phases(data / "logs" / "supervisor.log", launched, returned)
    butlers(env, "down", "--data-dir", str(data))
    return result, mem


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ±{max(values) - min(values):4.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", help="git ref to compare with (default: where this branch left main)"
    )
    parser.add_argument("--no-baseline", action="store_true", help="this checkout only")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.baseline is None:
        args.baseline = subprocess.run(
            ["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True, capture_output=True,
            text=True,
        ).stdout.strip()[:10]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="butlers-up-") as tmp:
        os.chmod(tmp, 0o755)  # the embedded server runs as another user when root
        variants: dict[str, dict[str, str]] = {"this": dict(os.environ)}
        if not args.no_baseline:
            src = export(args.baseline, Path(tmp))
            variants = {
                args.baseline: {**os.environ, "PYTHONPATH": str(src)},
                "this": dict(os.environ),
            }
        runs: dict[tuple[str, str], list[dict[str, float]]] = {}
        mems: dict[tuple[str, str], list[dict[str, tuple[float, float]]]] = {}
        loads = [os.getloadavg()[0]]
        for round_ in range(args.repeats):
            for name, env in variants.items():
                data = Path(tmp) / f"{name.replace('/', '_')}-{round_}" / "data"
                for kind in ("cold", "warm"):
                    result, mem = up(env, data)
                    runs.setdefault((name, kind), []).append(result)
                    mems.setdefault((name, kind), []).append(mem)
                    loads.append(os.getloadavg()[0])
    print("butlers up --detach, five roster butlers and the dashboard, until all are ready")
    print(f"{args.repeats} interleaved rounds; median ±spread (max-min), seconds")
    print(f"load average (1 min) during the run: {min(loads):.1f} .. {max(loads):.1f} (2 cores)")
    columns = list(runs)
    print(f"{'phase':<13}" + "".join(f"{f'{n} {k}':>18}" for n, k in columns))
    for phase in PHASES:
        cells = "".join(f"{spread([r[phase] for r in runs[c]]):>18}" for c in columns)
        print(f"{phase:<13}{cells}")
    print("\nidle memory, MB: RSS / PSS (median of the rounds)")
    processes = sorted({p for c in columns for m in mems[c] for p in m})
    print(f"{'process':<13}" + "".join(f"{f'{n} {k}':>18}" for n, k in columns))
    for process in processes:
        cells = ""
        for c in columns:
            pairs = [m[process] for m in mems[c] if process in m]
            rss = statistics.median(p[0] for p in pairs) if pairs else 0.0
            pss = statistics.median(p[1] for p in pairs) if pairs else 0.0
            cells += f"{f'{rss:.0f} / {pss:.0f}':>18}"
        print(f"{process:<13}{cells}")
    if len(variants) == 2:
        base = next(iter(variants))
        for kind in ("cold", "warm"):
            this = statistics.median(r["total"] for r in runs[("this", kind)])
            ratio = this / statistics.median(r["total"] for r in runs[(base, kind)])
            print(f"{kind} up, this / {base}: {ratio:.2f}")
    cold = statistics.median(r["total"] for r in runs[("this", "cold")])
    verdict = "met" if cold <= 3 else "NOT met"
    print(f"goal cold up <= 3 s (quiet machine): {verdict} ({cold:.2f} s)")


if __name__ == "__main__":
    main()
