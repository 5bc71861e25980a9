"""A real control plane and a process-kubelet node for this session's kube tests.

Skips (with one reason naming what is missing) when the control plane cannot
run here: no binaries (`python3 dev.py kube-binaries` builds them, needs Go) or
no root. Each test gets a fresh namespace, deleted afterwards.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from butlers.db.provision import deprovision
from tests.e2e.harness import userpath
from tests.kube.api import ApiError, KubeApi
from tests.kube.cluster import KubeCluster, kubelet_scratch, running_cluster
from tests.kube.controlplane import unavailable_reason
from tests.kube.wait import wait_deployment_available

ADMIN_SECRET = "butlers-admin"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "second_namespace: the `operator` fixture's chart serves `<namespace>-b` too"
    )


@pytest.fixture(scope="session")
async def kube_cluster() -> AsyncIterator[KubeCluster]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with kubelet_scratch("butlers-kube-") as root:
        # Restarts after 1 s, not the kubelet's 10 s: tests wait for crash loops.
        async with running_cluster(root, restart_backoff=1.0) as cluster:
            yield cluster


@pytest.fixture
async def kube(kube_cluster: KubeCluster) -> AsyncIterator[KubeApi]:
    """An admin client on this test's loop."""
    async with kube_cluster.api() as api:
        yield api


@pytest.fixture
async def namespace(kube: KubeApi) -> AsyncIterator[str]:
    name = f"t-{secrets.token_hex(3)}"
    await kube.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    yield name
    try:
        await kube.delete(f"/api/v1/namespaces/{name}")
    except ApiError:
        pass


@pytest.fixture(scope="session")
async def butler_crds(kube_cluster: KubeCluster) -> None:
    """The Butler CRD, installed with `helm install butlers-crds` once per session."""
    await userpath.install_crds(userpath.Cluster("default", kube_cluster.kubeconfig))


@dataclass
class OperatorRelease:
    """The operator chart installed in a test namespace, serving `namespaces`."""

    cluster: userpath.Cluster
    namespaces: tuple[str, ...]
    schema_prefix: str
    admin_dsn: str

    @property
    def account(self) -> str:
        return f"system:serviceaccount:{self.cluster.namespace}:{userpath.RELEASE}-operator"


async def install_operator(
    kube_cluster: KubeCluster,
    kube: KubeApi,
    namespace: str,
    admin_dsn: str,
    schema_prefix: str,
    watch: tuple[str, ...] = (),
    values: dict[str, Any] | None = None,
) -> OperatorRelease:
    cluster = userpath.Cluster(namespace, kube_cluster.kubeconfig)
    await userpath.apply(
        cluster, [userpath.build_secret(ADMIN_SECRET, namespace, {"dsn": admin_dsn})]
    )
    chart_values = {
        "database": {"adminSecret": {"name": ADMIN_SECRET}, "schemaPrefix": schema_prefix},
        "watch": {"mode": "namespaced", "namespaces": list(watch)},
        "resyncSeconds": 5,
        # These tests are about the operator; the dashboard runs in the e2e apiserver lane.
        "dashboard": {"enabled": False},
        **(values or {}),
    }
    await userpath.install_operator(cluster, chart_values)
    await wait_deployment_available(kube, namespace, f"{userpath.RELEASE}-operator")
    return OperatorRelease(cluster, (namespace, *watch), schema_prefix, admin_dsn)


async def drop_schemas(admin_dsn: str, prefix: str) -> None:
    """Every schema (and role) this test's operator provisioned."""
    connection = await asyncpg.connect(admin_dsn)
    try:
        rows = await connection.fetch(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)", prefix
        )
    finally:
        await connection.close()
    for row in rows:
        await deprovision(admin_dsn, row["nspname"])


@pytest.fixture
async def operator(
    request: pytest.FixtureRequest,
    kube_cluster: KubeCluster,
    kube: KubeApi,
    namespace: str,
    butler_crds: None,
    pg_admin_dsn: str,
    session_tag: str,
) -> AsyncIterator[OperatorRelease]:
    """The operator chart in this test's namespace (Pod Security `restricted` enforced, as
    the e2e lane's), on the session's PostgreSQL. A test marked `second_namespace` gets
    the same chart serving a second namespace too (`<namespace>-b`, a Role of its own
    there), installed so from the start: no upgrade rolls the operator's pod."""
    labels = userpath.build_namespace(userpath.Cluster(namespace))["metadata"]["labels"]
    await kube.patch(f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": labels}})
    watch: tuple[str, ...] = ()
    if request.node.get_closest_marker("second_namespace"):
        watch = (f"{namespace}-b",)
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": watch[0]}}
        await kube.create("/api/v1/namespaces", body)
    try:
        release = await install_operator(
            kube_cluster,
            kube,
            namespace,
            pg_admin_dsn,
            f"{session_tag}{namespace[2:]}_",
            watch=watch,
        )
        try:
            yield release
        finally:
            # As a user tears down: Butlers first, while the operator still runs.
            for served in release.namespaces:
                with contextlib.suppress(userpath.UserPathError):
                    await userpath.run(
                        userpath.build_kubectl(
                            userpath.Cluster(served, kube_cluster.kubeconfig),
                            "delete",
                            "butlers",
                            "--all",
                            "--wait=true",
                            "--timeout=60s",
                        )
                    )
            await drop_schemas(pg_admin_dsn, release.schema_prefix)
    finally:
        for extra in watch:
            with contextlib.suppress(ApiError):
                await kube.delete(f"/api/v1/namespaces/{extra}")
