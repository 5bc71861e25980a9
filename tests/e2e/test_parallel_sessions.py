"""Two whole e2e sessions side by side on one PostgreSQL server (documents 001, 004).

Each child session boots its own ecosystem (its own schema prefix, roles, free ports,
processes and scripted model) from the same server this session uses, and runs the
probe of parallel/probe_session.py: both are up at once, both write the same key in
every butler, and each reads back only its own. Afterwards neither left a schema.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import asyncpg
import pytest

from .conftest import ROOT
from .parallel.probe_session import PARALLEL_DIR, PARALLEL_NAME

SESSIONS = ("left", "right")
CHILD_TIMEOUT = 480.0


async def _session(name: str, shared: Path, server_dsn: str) -> tuple[int, str]:
    env = {
        **os.environ,
        "BUTLERS_DATABASE_URL": server_dsn,
        PARALLEL_DIR: str(shared),
        PARALLEL_NAME: name,
    }
    env.pop("PYTEST_ADDOPTS", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "tests/e2e/parallel/probe_session.py",
        "--backend",
        "local",
        "-p",
        "no:cacheprovider",
        "-q",
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), CHILD_TIMEOUT)
    except TimeoutError:
        process.kill()
        output, _ = await process.communicate()
    return process.returncode or 0, output.decode(errors="replace")


@pytest.mark.timeout(CHILD_TIMEOUT + 60)
async def test_two_sessions_run_side_by_side_without_touching_each_other(
    request: pytest.FixtureRequest, pg_server_dsn: str, pg_admin_dsn: str, tmp_path: Path
) -> None:
    if str(request.config.getoption("--backend")) != "local" or request.config.getoption("--kind"):
        pytest.skip("the side-by-side sessions run the local backend (run once, in its lane)")
    results = await asyncio.gather(*(_session(n, tmp_path, pg_server_dsn) for n in SESSIONS))
    for name, (code, output) in zip(SESSIONS, results, strict=True):
        assert code == 0, f"session {name} failed:\n{output[-4000:]}"
    up = {n: json.loads((tmp_path / f"{n}.up.json").read_text()) for n in SESSIONS}
    left, right = up["left"], up["right"]
    assert left["schema_prefix"] != right["schema_prefix"]
    assert set(left["schemas"]) == set(right["schemas"])  # the same roster, twice
    assert not set(left["schemas"].values()) & set(right["schemas"].values())
    assert not set(left["ports"].values()) & set(right["ports"].values())
    assert not set(left["pids"].values()) & set(right["pids"].values())
    assert left["dashboard_url"] != right["dashboard_url"]
    for name in SESSIONS:
        seen = json.loads((tmp_path / f"{name}.read").read_text())
        assert {v["session"] for v in seen.values()} == {name}
    conn = await asyncpg.connect(pg_server_dsn)
    try:
        left_over = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1) "
            "OR starts_with(nspname, $2)",
            left["schema_prefix"],
            right["schema_prefix"],
        )
    finally:
        await conn.close()
    assert left_over == [], "a session left its schemas behind"
