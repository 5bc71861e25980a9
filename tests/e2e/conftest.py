"""The `butler_ecosystem` fixture: one whole ecosystem per test session.

Backends (`--backend`): `local` (default) starts every roster butler as a local
process like `butlers up`, with a fresh schema prefix and free ports, so two
sessions can share one PostgreSQL server.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from butlers.testing.script_server import ScriptServer

from .harness.ecosystem import EcosystemHandle
from .harness.env import E2E_ENV
from .harness.local import local_ecosystem
from .harness.runtime import scripted_runtime_env

ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = ROOT / ".tmp" / "e2e-logs"


@pytest.fixture(scope="session")
async def butler_ecosystem(
    request: pytest.FixtureRequest,
    pg_admin_dsn: str,
    session_tag: str,
    tmp_path_factory: pytest.TempPathFactory,
    llm_script_server: ScriptServer,
) -> AsyncIterator[EcosystemHandle]:
    backend = (
        "kind" if request.config.getoption("--kind") else request.config.getoption("--backend")
    )
    if backend != "local":
        pytest.skip(f"e2e backend {backend!r} is not available in this checkout")
    data_dir = tmp_path_factory.mktemp("ecosystem")
    async with local_ecosystem(
        admin_dsn=pg_admin_dsn,
        roster_dir=Path(os.environ.get("BUTLERS_E2E_ROSTER", ROOT / "roster")),
        data_dir=data_dir,
        schema_prefix=f"e2e_{session_tag}",
        keep_schemas=request.config.getoption("--keep-schemas"),
        extra_env={
            **scripted_runtime_env(llm_script_server.url),
            **E2E_ENV,
            "BUTLERS_SPAN_DIR": str(data_dir / "spans"),
        },
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
