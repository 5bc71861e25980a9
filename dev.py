#!/usr/bin/env python3
"""Set up the development environment and run the project's main jobs.

Needs only Python 3.11+ and git. Creates `.venv/`, installs the project with its
development extras (re-installing when pyproject.toml changes), then runs:

    python3 dev.py up      # an embedded PostgreSQL and every roster butler (`butlers up`)
    python3 dev.py test    # the whole suite, tests/e2e on the operator backend, the images (CI)
    python3 dev.py lint    # ruff, mypy and the import-linter contracts (layers)
    python3 dev.py bench   # the benchmarks under bench/
    python3 dev.py run ... # any command inside the virtual environment
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".installed"


def _fingerprint() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_env() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 (dev.py may run on an older python3)
        sys.exit(f"Python 3.11 or newer is needed; this is {sys.version.split()[0]}")
    if not PY.exists():
        print(f"creating {VENV.relative_to(ROOT)}/", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    if STAMP.exists() and STAMP.read_text() == _fingerprint():
        return
    print("installing butlers and its development dependencies", flush=True)
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "-e", f"{ROOT}[dev]"], check=True)
    STAMP.write_text(_fingerprint())


def run(*args: str, pythonpath: Path | None = None) -> int:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    env["VIRTUAL_ENV"] = str(VENV)
    child = subprocess.Popen(list(args), cwd=ROOT, env=env)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            # Ctrl-C reaches the child too (same process group); let it shut down cleanly.
            continue


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0
    ensure_env()
    cmd, rest = argv[0], argv[1:]
    if cmd == "setup":
        return 0
    if cmd == "up":
        return run(str(BIN / "butlers"), "up", *rest)
    if cmd == "test":
        code = run(str(PY), "-m", "pytest", *rest)
        if not rest:
            # The same e2e suite again, on what the operator renders (offline, no Docker).
            code |= run(str(PY), "-m", "pytest", "tests/e2e", "--backend", "operator", "-q")
            # Both images built and run on Docker (the engine started or installed when it
            # can be; otherwise every test there skips with the reason).
            code |= run(str(PY), "-m", "pytest", "tests/images", "--images", "-q")
        # pytest exits 5 when nothing was collected: that is a failure here too.
        return code
    if cmd == "lint":
        code = run(str(PY), "-m", "ruff", "check", ".")
        code |= run(str(PY), "-m", "ruff", "format", "--check", ".")
        code |= run(str(PY), "-m", "mypy")
        code |= run(str(BIN / "lint-imports"), "--no-cache")
        return code
    if cmd == "bench":
        # `dev.py bench NAME [ARGS...]` runs one benchmark with its arguments.
        names = rest[:1] or sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))
        code = 0
        for name in names:
            # The repository root on the path: benchmarks share the tests' support code.
            code |= run(str(PY), str(ROOT / "bench" / name), *rest[1:], pythonpath=ROOT)
        return code
    if cmd == "run":
        return run(*rest)
    print(f"unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
