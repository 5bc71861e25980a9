"""The `butler_ecosystem` fixture: one whole ecosystem per test session.

Backends (`--backend`): `local` (default) starts every roster butler as a local
process like `butlers up`, with a fresh schema prefix and free ports, so two
sessions can share one PostgreSQL server. `operator` runs the real operator
against kmock's Kubernetes emulator and starts each Deployment it renders as
local processes (harness/operator.py). `kind` (`--kind`) installs the charts
into a kind cluster (harness/kind.py).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from butlers.testing.script_server import ScriptServer

from .harness.ecosystem import EcosystemHandle
from .harness.env import E2E_ENV
from .harness.kind import kind_ecosystem
from .harness.kind_commands import kind_unavailable_reason
from .harness.local import local_ecosystem
from .harness.operator import operator_ecosystem
from .harness.runtime import scripted_runtime_env

ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = ROOT / ".tmp" / "e2e-logs"
BACKENDS: dict[str, Any] = {
    "local": local_ecosystem,
    "operator": operator_ecosystem,
    "kind": kind_ecosystem,
}


@pytest.fixture(scope="session")
async def butler_ecosystem(
    request: pytest.FixtureRequest,
    session_tag: str,
    tmp_path_factory: pytest.TempPathFactory,
    llm_script_server: ScriptServer,
) -> AsyncIterator[EcosystemHandle]:
    backend = (
        "kind" if request.config.getoption("--kind") else request.config.getoption("--backend")
    )
    options: dict[str, Any] = {}
    if backend == "kind":
        reason = kind_unavailable_reason()
        if reason:
            pytest.skip(reason)
        options = {
            "kube_context": request.config.getoption("--kube-context"),
            "keep_namespace": request.config.getoption("--keep-namespace"),
        }
    data_dir = tmp_path_factory.mktemp("ecosystem")
    start = BACKENDS[backend]
    async with start(
        # The kind backend brings its own PostgreSQL (the chart's); the others share ours.
        admin_dsn="" if backend == "kind" else request.getfixturevalue("pg_admin_dsn"),
        roster_dir=Path(os.environ.get("BUTLERS_E2E_ROSTER", ROOT / "roster")),
        data_dir=data_dir,
        schema_prefix=f"e2e_{session_tag}",
        keep_schemas=request.config.getoption("--keep-schemas"),
        extra_env={
            **scripted_runtime_env(llm_script_server.url),
            **E2E_ENV,
            "BUTLERS_SPAN_DIR": str(data_dir / "spans"),
        },
        **options,
    ) as handle:
        try:
            yield handle
        finally:
            _collect_logs(data_dir / "logs")


def _collect_logs(log_dir: Path) -> None:
    """Concatenate butler logs into .tmp/e2e-logs/e2e-latest.log for triage greps."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with (LOG_DIR / "e2e-latest.log").open("w") as out:
        for path in sorted(log_dir.glob("*.log")):
            out.write(path.read_text(errors="replace"))
