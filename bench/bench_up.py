"""Cold and warm `butlers up --detach` until all five roster butlers are ready.

Cold: a new data directory (initdb, provisioning, migrations, five processes).
Warm: the same data directory again. Baseline, measured in the same run: one
bare Python interpreter importing the butler runtime (what one butler process
would cost without the fork server). Goal: cold <= 5 s on 2 cores.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUTLERS = [sys.executable, "-m", "butlers"]


def run(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([*BUTLERS, *args], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import butlers.daemon.serve"], check=True)
    baseline = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="butlers-up-") as tmp:
        data = str(Path(tmp) / "data")
        cold = run("up", "--data-dir", data, "--roster", str(ROOT / "roster"), "--detach")
        down = run("down", "--data-dir", data)
        warm = run("up", "--data-dir", data, "--roster", str(ROOT / "roster"), "--detach")
        run("down", "--data-dir", data)
    print("butlers up --detach, five roster butlers until all are ready")
    print(f"baseline: one interpreter importing the runtime: {baseline:.2f} s")
    print(
        f"cold up:  {cold:.2f} s ({cold / baseline:.1f}x baseline; goal <= 5 s: "
        f"{'met' if cold <= 5 else 'NOT met'})"
    )
    print(f"warm up:  {warm:.2f} s ({warm / baseline:.1f}x baseline)")
    print(f"down:     {down:.2f} s")


if __name__ == "__main__":
    main()
