"""Test-wide options, folder markers and the PostgreSQL server of a test session."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from butlers.db.embedded import EmbeddedPostgres
from butlers.testing.script_server import Script, ScriptServer
from tests.support.mock_spawner import MockSpawner
from tests.support.scratch import scratch_dir
from tests.support.sweep import Swept, sweep, take_lease

SWEPT = pytest.StashKey[list[Swept]]()

ROOT = Path(__file__).resolve().parent.parent
FOLDER_MARKERS = {"unit": "unit", "integration": "integration", "e2e": "e2e", "images": "images"}
# Seconds one test may take, per tier (pytest-timeout); a test may ask for more with its
# own `@pytest.mark.timeout(...)`. Generous on purpose: they catch hangs, not slowness
# (an e2e session's first test also pays for starting its ecosystem).
TIER_TIMEOUTS = {"unit": 30, "integration": 180, "e2e": 600, "images": 1800}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("butlers")
    group.addoption(
        "--backend",
        choices=["local", "operator", "apiserver", "kind"],
        default=os.environ.get("BUTLERS_E2E_BACKEND", "local"),
        help="how tests/e2e starts its ecosystem (default local)",
    )
    group.addoption("--kind", action="store_true", help="run e2e on a kind cluster (needs Docker)")
    group.addoption("--kube-context", default=None, help="reuse this cluster for --kind")
    group.addoption("--keep-namespace", action="store_true", help="keep the --kind namespace")
    group.addoption(
        "--live-llm", action="store_true", help="run live_llm tests against a real model"
    )
    group.addoption(
        "--model-server",
        action="store_true",
        help="run e2e on a real OpenAI-compatible server: BUTLERS_OPENAI_BASE_URL, else "
        "llama-cpp-python with SmolLM2-135M started on loopback (the model_server lane)",
    )
    group.addoption(
        "--images",
        action="store_true",
        help="build both images and run them on a Docker engine (started or installed if need be)",
    )
    group.addoption("--update-golden", action="store_true", help="rewrite golden files")
    group.addoption("--keep-schemas", action="store_true", help="do not drop test schemas")


@pytest.hookimpl(trylast=True)  # after the tiers' own conftests, whose timeouts win
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        marker = FOLDER_MARKERS.get(parts[0]) if parts else None
        if marker:
            item.add_marker(getattr(pytest.mark, marker))
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(TIER_TIMEOUTS[marker]))
        if "live_llm" in item.keywords and not real_model_given(config):
            item.add_marker(pytest.mark.skip(reason=LIVE_SKIP))
        if "model_server" in item.keywords and not config.getoption("--model-server"):
            item.add_marker(
                pytest.mark.skip(reason="the model-server lane: run with --model-server")
            )


LIVE_SKIP = (
    "needs a real model: run with --live-llm, or --model-server with BUTLERS_OPENAI_BASE_URL "
    "(the lane's own SmolLM2-135M cannot route)"
)


def real_model_given(config: pytest.Config) -> bool:
    """A model able to route and fill arguments: --live-llm, or --model-server pointed
    at a server of the user's (`BUTLERS_OPENAI_BASE_URL`)."""
    if config.getoption("--live-llm"):
        return True
    return bool(config.getoption("--model-server") and os.environ.get("BUTLERS_OPENAI_BASE_URL"))


@pytest.fixture(scope="session")
def session_tag() -> str:
    """A short random tag: schema and role names of this session start with it."""
    return f"t{secrets.token_hex(3)}_"


@pytest.fixture(scope="session")
def pg_server_dsn() -> Iterator[str]:
    """Superuser DSN of this session's PostgreSQL: BUTLERS_DATABASE_URL, else embedded."""
    url = os.environ.get("BUTLERS_DATABASE_URL")
    if url:
        yield url
        return
    with scratch_dir("butlers-test-pg-") as root:
        server = EmbeddedPostgres(root / "postgres", fsync=False)
        server.start()
        try:
            yield server.admin_dsn()
        finally:
            server.stop()


@pytest.fixture(scope="session")
async def pg_admin_dsn(
    pg_server_dsn: str, session_tag: str, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """The session's PostgreSQL, leased for this session's tag: first the schemas and
    roles crashed sessions left on the server are dropped (tests/support/sweep.py), and
    this session's lease keeps a later sweep off its own until it ends."""
    lease = await take_lease(pg_server_dsn, session_tag)
    try:
        request.config.stash[SWEPT] = await sweep(pg_server_dsn)
        yield pg_server_dsn
    finally:
        await lease.release()


@pytest.fixture(scope="session")
def llm_script_server(request: pytest.FixtureRequest) -> Iterator[ScriptServer]:
    """The HTTP script server every `scripted` runtime of this session asks for steps.

    For the kind backend it listens on every interface: pods call it from the cluster.
    """
    on_kind = request.config.getoption("--kind") or request.config.getoption("--backend") == "kind"
    server = ScriptServer(host="0.0.0.0" if on_kind else "127.0.0.1").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llm_script(llm_script_server: ScriptServer) -> Iterator[Script]:
    """A fresh LLM script for one test; fails the test on leftover or missing steps."""
    script = llm_script_server.reset()
    yield script
    problems = script.check()
    llm_script_server.reset()
    if problems:
        pytest.fail("LLM script: " + "; ".join(problems), pytrace=False)


@pytest.fixture
def mock_spawner() -> MockSpawner:
    return MockSpawner()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for swept in config.stash.get(SWEPT, []):
        terminalreporter.write_line(
            f"dropped what crashed test session {swept.tag} left on the server: "
            f"schemas {swept.schemas}, roles {swept.roles}"
        )
