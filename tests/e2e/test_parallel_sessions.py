"""Two whole e2e sessions side by side on one PostgreSQL server (documents 001, 004).

This session starts a second one (another pytest process), which boots its own
ecosystem (its own schema prefix, roles, free ports, processes and scripted model) on
the server this session uses. Both run the probe of parallel/probe_session.py: both are
up at once, both write the same key in every butler, and each reads back only its own.
The second session leaves no schema behind.
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
from .harness.ecosystem import EcosystemHandle
from .parallel.probe_session import PARALLEL_DIR, PARALLEL_NAME, probe

ME, OTHER = "this", "other"
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
    butler_ecosystem: EcosystemHandle, pg_server_dsn: str, tmp_path: Path
) -> None:
    if butler_ecosystem.backend != "local":
        pytest.skip("the side-by-side sessions run the local backend (run once, in its lane)")
    other = asyncio.create_task(_session(OTHER, tmp_path, pg_server_dsn))
    try:
        seen, mine = await probe(butler_ecosystem, tmp_path, ME, lambda: not other.done())
    except AssertionError as exc:
        code, output = await other
        raise AssertionError(f"{exc}; the other session ({code}):\n{output[-4000:]}") from exc
    code, output = await other
    assert code == 0, f"the other session failed:\n{output[-4000:]}"
    assert seen == {butler: mine for butler in butler_ecosystem.names}
    up = {n: json.loads((tmp_path / f"{n}.up.json").read_text()) for n in (ME, OTHER)}
    this, that = up[ME], up[OTHER]
    assert this["schema_prefix"] != that["schema_prefix"]
    assert set(this["schemas"]) == set(that["schemas"])  # the same roster, twice
    assert not set(this["schemas"].values()) & set(that["schemas"].values())
    assert not set(this["ports"].values()) & set(that["ports"].values())
    assert not set(this["pids"].values()) & set(that["pids"].values())
    assert this["dashboard_url"] != that["dashboard_url"]
    read = json.loads((tmp_path / f"{OTHER}.read").read_text())
    assert {v["session"] for v in read.values()} == {OTHER}
    conn = await asyncpg.connect(pg_server_dsn)
    try:
        left_over = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)",
            that["schema_prefix"],
        )
    finally:
        await conn.close()
    assert left_over == [], "the other session left its schemas behind"
