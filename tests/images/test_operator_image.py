"""The operator image reconciles a Butler, and the butler image runs what it rendered.

The operator container runs as its chart runs it (read-only root, user 10001, every
capability dropped, `/tmp` a tmpfs) against kmock's Kubernetes emulator (served on
127.0.0.1) and this session's PostgreSQL. Its liveness endpoint has a fixed port
(8080): the test holds a machine-wide lock while it runs, so two sessions take turns.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import kmock
import pytest
import yaml

from butlers.db.embedded import free_port
from butlers.db.provision import deprovision
from images.build import Built
from images.engine import cache_dir, docker, file_lock
from tests.support.docker_pods import DockerPod, PodFailed
from tests.support.kube_emulator import declare_cluster

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "butlers-images"
LIVENESS_PORT = 8080
RECONCILE_TIMEOUT = 60.0


def operator_run(image: str, name: str, env: dict[str, str]) -> list[str]:
    """The operator container with its chart's security context, on the host's network."""
    return [
        "run", "--detach", "--name", name, "--network", "host",
        "--user", "10001:10001", "--read-only", "--tmpfs", "/tmp:rw,mode=1777,size=67108864",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        *(arg for key, value in env.items() for arg in ("--env", f"{key}={value}")),
        image,
    ]  # fmt: skip


def butler_object(port: int) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())
    document["spec"]["port"] = port
    document["metadata"] |= {
        "namespace": NAMESPACE,
        "uid": "uid-images-operator",
        "generation": 1,
        "resourceVersion": "1",
    }
    return dict(document)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


async def _items(session: aiohttp.ClientSession, prefix: str, plural: str) -> list[dict[str, Any]]:
    async with session.get(f"{prefix}/namespaces/{NAMESPACE}/{plural}") as response:
        response.raise_for_status()
        return list((await response.json()).get("items") or [])


async def _wait_database_ready(session: aiohttp.ClientSession, operator: str) -> dict[str, Any]:
    deadline = time.monotonic() + RECONCILE_TIMEOUT
    while True:
        for butler in await _items(session, "/apis/butlers.dev/v1alpha1", "butlers"):
            conditions = (butler.get("status") or {}).get("conditions") or []
            if any(c["type"] == "DatabaseReady" and c["status"] == "True" for c in conditions):
                return butler
        if time.monotonic() > deadline:
            result = docker("logs", operator, check=False)
            logs = (result.stdout + result.stderr)[-5000:]
            raise AssertionError(f"no DatabaseReady after {RECONCILE_TIMEOUT:.0f} s:\n{logs}")
        await asyncio.sleep(0.1)


@pytest.fixture
async def operator_prefix(pg_admin_dsn: str, session_tag: str) -> AsyncIterator[str]:
    """The operator's schema prefix; every schema and role it made is dropped at the end."""
    prefix = f"{session_tag}op_"
    yield prefix
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        pattern = prefix.replace("_", "\\_") + "%"
        schemas = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", pattern
        )
        roles = await conn.fetch("SELECT rolname FROM pg_roles WHERE rolname LIKE $1", pattern)
    finally:
        await conn.close()
    for name in {row[0] for row in [*schemas, *roles]}:
        await deprovision(pg_admin_dsn, name)


async def test_operator_image_reconciles_and_the_butler_image_runs_its_deployment(
    images: dict[str, Built],
    pg_admin_dsn: str,
    operator_prefix: str,
    pod_workdir: Path,
    pods: list[DockerPod],
) -> None:
    port = free_port()
    operator = f"butlers-operator-{operator_prefix.strip('_')}"
    env = {
        "BUTLERS_OPERATOR_NAMESPACES": NAMESPACE,
        "BUTLERS_OPERATOR_NAMESPACE": "butlers-system",
        "BUTLERS_OPERATOR_ADMIN_DSN": pg_admin_dsn,
        "BUTLERS_OPERATOR_SCHEMA_PREFIX": operator_prefix,
        "BUTLERS_OPERATOR_BUTLER_IMAGE": images["butler"].tag,
        "BUTLERS_OPERATOR_RETRY_BASE_SECONDS": "0.5",
    }
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare_cluster(emulator, NAMESPACE)
        url = str(emulator.url).rstrip("/")
        env["BUTLERS_OPERATOR_KUBE_SERVER"] = url
        with file_lock(cache_dir("docker") / f"port-{LIVENESS_PORT}.lock"):
            assert _port_free(LIVENESS_PORT), f"port {LIVENESS_PORT} (operator liveness) is taken"
            docker(*operator_run(images["operator"].tag, operator, env))
            try:
                async with aiohttp.ClientSession(base_url=url) as session:
                    path = f"/apis/butlers.dev/v1alpha1/namespaces/{NAMESPACE}/butlers"
                    async with session.post(path, json=butler_object(port)) as response:
                        assert response.status < 300, await response.text()
                    await _wait_database_ready(session, operator)
                    [deployment] = await _items(session, "/apis/apps/v1", "deployments")
                    secrets = await _items(session, "/api/v1", "secrets")
                    maps = await _items(session, "/api/v1", "configmaps")
                liveness = f"http://127.0.0.1:{LIVENESS_PORT}/healthz"
                async with aiohttp.ClientSession() as probe, probe.get(liveness) as response:
                    assert response.status == 200
            finally:
                docker("rm", "--force", operator, check=False)
    pod = DockerPod(
        deployment,
        {s["metadata"]["name"]: s for s in secrets},
        {m["metadata"]["name"]: m for m in maps},
        pod_workdir,
    )
    pods.append(pod)
    butler = await pod.start_pod()
    try:
        await pod.wait_http(butler, f"http://127.0.0.1:{port}/ready")
    except PodFailed as exc:
        pytest.fail(str(exc))
