"""The images lane (`--images`): both images built once per session, then run on Docker.

The engine is reused, started or installed (`images.engine`); without one, or without
`--images`, every test here skips with one reason. Images are tagged by a digest of
what they are built from, so sessions of other checkouts never run each other's.
Sizes and build times are printed at the end of the session.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from images.base import BaseUnavailable, ensure_bases
from images.build import NAMES, Built, build_all, content_key, prune, report
from images.engine import EngineUnavailable, ensure_engine
from tests.support.docker_pods import DockerPod
from tests.support.scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[2]
REPORT = pytest.StashKey[list[str]]()
# The first test's setup builds everything: on a cold machine (a Debian base to make,
# wheels to fetch) that is several minutes on 2 cores.
TIMEOUT_SECONDS = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(TIMEOUT_SECONDS))


@pytest.fixture(scope="session")
def docker_engine(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("--images"):
        pytest.skip("builds and runs the images on Docker: run with --images")
    try:
        ensure_engine()
    except EngineUnavailable as exc:
        pytest.skip(f"images lane needs a Docker engine: {exc}")


@pytest.fixture(scope="session")
def images(docker_engine: None, request: pytest.FixtureRequest) -> dict[str, Built]:
    """Both images, built from this checkout (name -> what was built)."""
    started = time.monotonic()
    try:
        bases = ensure_bases("auto", ROOT)
    except BaseUnavailable as exc:
        pytest.skip(f"images lane has no base image: {exc}")
    prepared = time.monotonic() - started
    tags = {name: f"butlers-test/{name}:{content_key(name, bases)}" for name in NAMES}
    built = build_all(tags, bases)
    request.config.stash[REPORT] = report(built, bases, prepared)
    for name in NAMES:
        prune(f"butlers-test/{name}", keep=tags.values())
    return {image.name: image for image in built}


@pytest.fixture
def pod_workdir() -> Iterator[Path]:
    """Files and env files of a test's containers (readable by the containers' user)."""
    with scratch_dir("butlers-images-") as root:
        root.chmod(0o755)
        yield root


@pytest.fixture
async def pods() -> AsyncIterator[list[DockerPod]]:
    """Pods a test starts: every container of each is removed at the end."""
    started: list[DockerPod] = []
    try:
        yield started
    finally:
        for pod in started:
            await pod.remove()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    lines = config.stash.get(REPORT, None)
    if lines:
        terminalreporter.section("images")
        for line in lines:
            terminalreporter.write_line(line)
