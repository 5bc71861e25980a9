"""The `butler_ecosystem` fixture: one whole ecosystem per test session.

Backends (`--backend`): `local` (default) starts every roster butler as a local
process like `butlers up`, with a fresh schema prefix and free ports, so two
sessions can share one PostgreSQL server. `operator` runs the real operator
against kmock's Kubernetes emulator and starts each Deployment it renders as
local processes (harness/operator.py). `apiserver` installs the charts on a
real control plane built from Go modules, with a process kubelet as its node
(harness/apiserver.py). `kind` (`--kind`) installs the charts into a kind
cluster (harness/kind.py); both follow the user path of harness/userpath.py.

Butlers run the scripted model; with `--live-llm` they run the real model configured
in the environment (see `harness.runtime.live_runtime_problem`), and `cost_tracker`
adds up what it cost.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from butlers.testing.script_server import Script, ScriptServer
from tests.support.radicale import start_radicale
from tests.support.telegram_api import TelegramApi, telegram_api

from .harness.apiserver import apiserver_ecosystem
from .harness.apiserver import unavailable_reason as apiserver_unavailable_reason
from .harness.cost import CostTracker
from .harness.ecosystem import EcosystemHandle
from .harness.env import (
    CALDAV_CALENDAR,
    CALDAV_SERVER,
    CALDAV_USER,
    E2E_ENV,
    SUPERVISOR_SECRET,
    caldav_env,
    caldav_host,
)
from .harness.kind import kind_ecosystem
from .harness.kind_commands import kind_unavailable_reason
from .harness.local import local_ecosystem
from .harness.log_relay import LogRelay
from .harness.model_lane import (
    capped_roster,
    external_model_url,
    lane_caps,
    model_runtime_env,
)
from .harness.operator import operator_ecosystem
from .harness.ordering import smoke_first
from .harness.psql import database_lines
from .harness.runtime import live_runtime_env, live_runtime_problem, scripted_runtime_env
from .harness.telegram import owned_roster, telegram_env

ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = ROOT / ".tmp" / "e2e-logs"
BACKENDS: dict[str, Any] = {
    "local": local_ecosystem,
    "operator": operator_ecosystem,
    "apiserver": apiserver_ecosystem,
    "kind": kind_ecosystem,
}
COST_TRACKER = pytest.StashKey[CostTracker]()
# The `psql` lines the session logged at its start (for the test that checks them).
DATABASE_LINES = pytest.StashKey[list[str]]()
log = logging.getLogger("butlers.e2e.session")


# The kind lane of this session: None when it is up, else why not ("skip: ..."/"error: ...").
KIND_LANE = pytest.StashKey[str | None]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """`--kind` without `--kube-context`: the lane's cluster and images are prepared here,
    before the first test (and outside its timeout); `pytest_sessionfinish` removes them."""
    config = session.config
    if _backend(config) != "kind" or config.getoption("--kube-context"):
        return
    from tests.kind import lane

    reason = lane.unavailable_reason()
    if reason is not None:
        config.stash[KIND_LANE] = f"skip: {reason}"
        return
    try:
        lane.prepare(lambda line: print(line, flush=True))
    except Exception as exc:
        config.stash[KIND_LANE] = f"error: the kind lane could not be prepared: {exc}"
        lane.finish(lambda line: print(line, flush=True))
        return
    config.stash[KIND_LANE] = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    if KIND_LANE in session.config.stash and session.config.stash[KIND_LANE] is None:
        from tests.kind import lane

        lane.finish(lambda line: print(line, flush=True))


@pytest.fixture(scope="session")
def kind_context(request: pytest.FixtureRequest) -> str:
    """The kube context of the kind cluster this session runs on (skips off the kind lane)."""
    config = request.config
    if _backend(config) != "kind":
        pytest.skip("needs a real node: run with --kind (or --backend kind)")
    problem = config.stash.get(KIND_LANE, None)
    if problem is not None and problem.startswith("skip: "):
        pytest.skip(problem.removeprefix("skip: "))
    if problem is not None:
        pytest.fail(problem)
    return str(config.getoption("--kube-context") or "kind-butlers")


@pytest.hookimpl(tryfirst=True)  # before -k deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Scenario tags become keywords, so `-k smoke` selects tagged scenarios; the smoke
    tests run first (harness/ordering.py)."""
    items[:] = smoke_first(items)
    for item in items:
        scenario = getattr(getattr(item, "callspec", None), "params", {}).get("scenario")
        tags = getattr(scenario, "tags", None)
        if tags:
            item.extra_keyword_matches.update(tags)


@pytest.fixture
def llm_script(request: pytest.FixtureRequest, llm_script: Script) -> Script:
    """The test-wide `llm_script`; e2e tests that script the model skip with a real one."""
    for option in ("--live-llm", "--model-server"):
        if request.config.getoption(option):
            pytest.skip(f"scripted model steps do not apply with {option} (a real model answers)")
    return llm_script


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    """--update-golden; refused when CI is set, so a pipeline never rewrites expectations."""
    update = bool(request.config.getoption("--update-golden"))
    if update and os.environ.get("CI"):
        pytest.fail("--update-golden rewrites golden files and is refused when CI is set")
    return update


@pytest.fixture(scope="session")
def live_runtime(request: pytest.FixtureRequest) -> None:
    """Skips unless a real model is configured: --live-llm, or --model-server with
    BUTLERS_OPENAI_BASE_URL (harness/model_lane.py)."""
    if request.config.getoption("--model-server"):
        if not external_model_url(os.environ):
            pytest.skip(
                "the lane's SmolLM2-135M cannot route: set BUTLERS_OPENAI_BASE_URL "
                "(and BUTLERS_MODEL) to check routing and rows against a real model"
            )
        return
    if not request.config.getoption("--live-llm"):
        pytest.skip("needs a real model: run with --live-llm")
    problem = live_runtime_problem(os.environ)
    if problem:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def cost_tracker(request: pytest.FixtureRequest) -> Iterator[CostTracker]:
    """Tokens and cost of the live-model sessions; fails the run past $0.20."""
    tracker = request.config.stash.setdefault(COST_TRACKER, CostTracker())
    yield tracker
    problem = tracker.total_problem()
    if problem:
        pytest.fail(problem, pytrace=False)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    tracker = config.stash.get(COST_TRACKER, None)
    if tracker is not None and tracker.scenarios:
        terminalreporter.section("live LLM cost")
        for line in tracker.summary():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def model_server_env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The butlers' runtime settings for --model-server: the user's server, or
    llama-cpp-python's with SmolLM2 started here for the session."""
    url = external_model_url(os.environ)
    if url:
        model = os.environ.get("BUTLERS_MODEL")
        if not model:
            pytest.skip("--model-server with BUTLERS_OPENAI_BASE_URL needs BUTLERS_MODEL")
        key = os.environ.get("BUTLERS_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY")
        yield model_runtime_env(url, model, key)
        return
    from tests.support.model_server import running_server, unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    log_dir = tmp_path_factory.mktemp("model-server")
    with running_server(log_dir) as server:
        request.config.stash[MODEL_SERVER_LOG] = server.log
        yield model_runtime_env(server.base_url, server.model, None)


MODEL_SERVER_LOG = pytest.StashKey[Path]()


def _backend(config: pytest.Config) -> str:
    return "kind" if config.getoption("--kind") else str(config.getoption("--backend"))


def chosen_log_level(config: pytest.Config) -> str | None:
    """The level asked of pytest's logging (--log-cli-level, else --log-level, or their
    ini settings): the local backend's butlers log at it."""
    for name in ("log_cli_level", "log_level"):
        value = config.getoption(name) or config.getini(name)
        if value:
            return str(value).upper()
    return None


@pytest.fixture(scope="session")
def ecosystem_admin_dsn(request: pytest.FixtureRequest) -> str:
    """The session's PostgreSQL for the local backends; the kind backend brings its own
    (the chart's), so no server is started for it."""
    if _backend(request.config) == "kind":
        return ""
    return str(request.getfixturevalue("pg_admin_dsn"))


@pytest.fixture(scope="session")
async def telegram_stand_in(request: pytest.FixtureRequest) -> AsyncIterator[TelegramApi]:
    """The Bot API stand-in the ecosystem's messenger talks to (harness/telegram.py); on
    every interface for the kind backend, whose pods call it from the cluster."""
    from .harness.telegram import TOKEN

    host = "0.0.0.0" if _backend(request.config) == "kind" else "127.0.0.1"
    async with telegram_api(TOKEN, host) as api:
        yield api


@pytest.fixture(scope="session")
async def butler_ecosystem(
    request: pytest.FixtureRequest,
    session_tag: str,
    tmp_path_factory: pytest.TempPathFactory,
    llm_script_server: ScriptServer,
    ecosystem_admin_dsn: str,
    telegram_stand_in: TelegramApi,
) -> AsyncIterator[EcosystemHandle]:
    backend = _backend(request.config)
    options: dict[str, Any] = {}
    if backend == "kind":
        request.getfixturevalue("kind_context")  # the lane's own skip or error first
        reason = kind_unavailable_reason()
        if reason:
            pytest.skip(reason)
        options = {
            "kube_context": request.config.getoption("--kube-context"),
            "keep_namespace": request.config.getoption("--keep-namespace"),
        }
    level = chosen_log_level(request.config)
    if backend == "local" and level:
        options["log_level"] = level
    if backend == "apiserver":
        reason = apiserver_unavailable_reason()
        if reason:
            pytest.skip(reason)
    roster_dir = Path(os.environ.get("BUTLERS_E2E_ROSTER", ROOT / "roster"))
    if request.config.getoption("--model-server"):
        runtime_env = request.getfixturevalue("model_server_env")
        roster_dir = capped_roster(
            roster_dir, tmp_path_factory.mktemp("capped-roster"), lane_caps(os.environ)
        )
    elif request.config.getoption("--live-llm"):
        problem = live_runtime_problem(os.environ)
        if problem:
            pytest.skip(problem)
        runtime_env = live_runtime_env(os.environ)
    else:
        runtime_env = scripted_runtime_env(llm_script_server.url)
    roster_dir = owned_roster(roster_dir, tmp_path_factory.mktemp("owned-roster"))
    data_dir = tmp_path_factory.mktemp("ecosystem")
    start = BACKENDS[backend]
    name, secret = SUPERVISOR_SECRET
    calendar_server = ExitStack()
    server = calendar_server.enter_context(
        start_radicale(tmp_path_factory.mktemp("radicale"), host=caldav_host(backend))
    )
    await asyncio.to_thread(server.make_calendar, CALDAV_USER, CALDAV_CALENDAR)
    caldav_url = server.principal_url(CALDAV_USER)
    request.config.stash[CALDAV_SERVER] = caldav_url
    os.environ[name] = secret  # must reach no butler (test_spawner_security)
    with calendar_server:
        async with start(
            admin_dsn=ecosystem_admin_dsn,
            roster_dir=roster_dir,
            data_dir=data_dir,
            schema_prefix=f"e2e_{session_tag}",
            keep_schemas=request.config.getoption("--keep-schemas"),
            extra_env={
                **runtime_env,
                **E2E_ENV,
                **caldav_env(caldav_url),
                **telegram_env(telegram_stand_in.url),
                "BUTLERS_SPAN_DIR": str(data_dir / "spans"),
            },
            **options,
        ) as handle:
            relay = LogRelay(handle.log_dir).start() if handle.log_dir is not None else None
            request.config.stash[DATABASE_LINES] = database_lines(handle)
            for line in request.config.stash[DATABASE_LINES]:
                log.info("%s", line)
            try:
                yield handle
            finally:
                os.environ.pop(name, None)
                if relay is not None:
                    relay.stop()
                if handle.log_dir is not None:
                    _collect_logs(handle.log_dir)


def _collect_logs(log_dir: Path) -> None:
    """Concatenate butler logs into .tmp/e2e-logs/e2e-latest.log for triage greps."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed: sessions running side by side each leave a whole file.
    partial = LOG_DIR / f".e2e-latest.{os.getpid()}.log"
    with partial.open("w") as out:
        for path in sorted(log_dir.glob("*.log")):
            out.write(path.read_text(errors="replace"))
    partial.replace(LOG_DIR / "e2e-latest.log")
