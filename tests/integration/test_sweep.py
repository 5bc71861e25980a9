"""The sweep of what crashed test sessions left on a shared server (tests/support/sweep.py).

A crashed session is a real process that takes a lease, provisions schemas and roles
the way test sessions do, and is SIGKILLed; the sweep must drop exactly its objects and
spare a live session's, a user's, and this session's own.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import asyncpg
import pytest

from butlers.db.provision import deprovision, provision
from tests.support.sweep import REGISTRY_SCHEMA, sweep, take_lease

ROOT = Path(__file__).resolve().parents[2]
CRASHING_SESSION = textwrap.dedent(
    """
    import asyncio, sys
    from butlers.db.provision import provision
    from tests.support.sweep import take_lease

    async def main(dsn, tag):
        lease = await take_lease(dsn, tag)
        for schema in (f"{tag}s0", f"e2e_{tag}health"):
            await provision(dsn, schema)
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def _tag() -> str:
    return f"t{secrets.token_hex(3)}_"


async def _crash_a_session(dsn: str, tag: str) -> None:
    """A session that leased `tag`, provisioned two schemas, and was killed -9."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_SESSION,
        dsn,
        tag,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert line.strip() == b"ready", line
    process.kill()
    await process.wait()


async def _schemas(dsn: str, *names: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[])", list(names)
        )
        roles = await conn.fetch(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])", list(names)
        )
    finally:
        await conn.close()
    return {r["nspname"] for r in rows} | {f"role:{r['rolname']}" for r in roles}


async def test_sweep_drops_a_killed_sessions_objects_and_spares_the_rest(
    pg_admin_dsn: str, session_tag: str
) -> None:
    crashed, live = _tag(), _tag()
    await _crash_a_session(pg_admin_dsn, crashed)
    lease = await take_lease(pg_admin_dsn, live)
    own = f"{session_tag}sweep_own"
    user = f"user_{secrets.token_hex(3)}_health"
    kept = [f"{live}s0", own, user]
    for schema in kept:
        await provision(pg_admin_dsn, schema)
    # Named after the crashed tag but not a test butler's (owned by another role): kept.
    foreign = f"{crashed}userdata"
    conn = await asyncpg.connect(pg_admin_dsn)
    await conn.execute(f'CREATE SCHEMA "{foreign}"')
    try:
        swept = await sweep(pg_admin_dsn)
        left = await _schemas(pg_admin_dsn, f"{crashed}s0", f"e2e_{crashed}health", foreign, *kept)
        registered = {
            r["tag"] for r in await conn.fetch(f"SELECT tag FROM {REGISTRY_SCHEMA}.sessions")
        }
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{foreign}"')
        await conn.close()
        await lease.release()
        for schema in kept:
            await deprovision(pg_admin_dsn, schema)
    mine = [s for s in swept if s.tag == crashed]
    assert [(s.schemas, s.roles) for s in mine] == [
        ([f"e2e_{crashed}health", f"{crashed}s0"], [f"e2e_{crashed}health", f"{crashed}s0"])
    ]
    assert not [s for s in swept if s.tag in (live, session_tag)]
    assert left == {foreign, *kept, *(f"role:{s}" for s in (f"{live}s0", own, user))}
    assert crashed not in registered and {live, session_tag} <= registered


@pytest.mark.timeout(180)
async def test_a_test_session_sweeps_at_start(pg_admin_dsn: str) -> None:
    """A new pytest session on the same server (one quick test of this suite) drops a
    crashed session's leftovers before its first test and says so in its summary."""
    crashed = _tag()
    await _crash_a_session(pg_admin_dsn, crashed)
    env = {**os.environ, "BUTLERS_DATABASE_URL": pg_admin_dsn}
    result = await asyncio.to_thread(
        subprocess.run,
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("tests/integration/test_provision.py", "-k", "own_schema_by_default"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"dropped what crashed test session {crashed}" in result.stdout, result.stdout
    assert await _schemas(pg_admin_dsn, f"{crashed}s0", f"e2e_{crashed}health") == set()
