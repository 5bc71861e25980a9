"""The probe each of two side-by-side e2e sessions runs (test_parallel_sessions.py).

The test runs it in its own session and in a second one it starts (which sets
BUTLERS_E2E_PARALLEL_DIR). Each session records its schemas, ports and processes,
waits until the other is up too, then writes a value of its own under a key both use
and reads it back: each must see its own value, in its own schemas, while both run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from butlers.waiting import wait_until

from ..harness.ecosystem import EcosystemHandle

PARALLEL_DIR = "BUTLERS_E2E_PARALLEL_DIR"
PARALLEL_NAME = "BUTLERS_E2E_PARALLEL_NAME"
KEY = "parallel-probe"


async def test_probe_sees_only_its_own_session(butler_ecosystem: EcosystemHandle) -> None:
    if not os.environ.get(PARALLEL_DIR):
        pytest.skip(f"run by test_parallel_sessions.py (it sets {PARALLEL_DIR})")
    seen, mine = await probe(
        butler_ecosystem, Path(os.environ[PARALLEL_DIR]), os.environ[PARALLEL_NAME]
    )
    assert seen == {butler: mine for butler in butler_ecosystem.names}


async def probe(
    butler_ecosystem: EcosystemHandle,
    shared: Path,
    me: str,
    peer_alive: Callable[[], bool] = lambda: True,
) -> tuple[dict[str, object], dict[str, str]]:
    """What this session read back under the shared key, and what it wrote.

    `peer_alive`: False once the other session is known to have ended (waits stop)."""

    def peer(path: Callable[[], Any]) -> Callable[[], Any]:
        def check() -> Any:
            found = path()
            if not found and not peer_alive():
                raise AssertionError("the other session ended before it got this far")
            return found

        return check

    facts = {
        "name": me,
        "schema_prefix": butler_ecosystem.schema_prefix,
        "schemas": {n: butler_ecosystem[n].schema for n in butler_ecosystem.names},
        "ports": {n: butler_ecosystem[n].port for n in butler_ecosystem.names},
        "pids": {n: butler_ecosystem.pid(n) for n in butler_ecosystem.names},
        "dashboard_url": butler_ecosystem.dashboard_url,
    }
    (shared / f"{me}.up.json").write_text(json.dumps(facts))
    others = await wait_until(
        peer(lambda: [p for p in shared.glob("*.up.json") if p.name != f"{me}.up.json"]),
        timeout=300,
        message="the other session never came up beside this one",
    )
    other = json.loads(others[0].read_text())
    mine = {"session": me, "prefix": butler_ecosystem.schema_prefix}
    for butler in butler_ecosystem.names:
        await butler_ecosystem.call(butler, "state_set", {"key": KEY, "value": mine})
    (shared / f"{me}.wrote").write_text("")
    await wait_until(
        peer(lambda: (shared / f"{other['name']}.wrote").exists()),
        timeout=300,
        message="the other session never wrote its probe",
    )
    seen = {
        butler: await butler_ecosystem.call(butler, "state_get", {"key": KEY})
        for butler in butler_ecosystem.names
    }
    # Both sessions are still up: the other one waits for this file before it ends.
    (shared / f"{me}.read").write_text(json.dumps(seen))
    await wait_until(
        peer(lambda: (shared / f"{other['name']}.read").exists()),
        timeout=300,
        message="the other session never read its probe",
    )
    return seen, mine
