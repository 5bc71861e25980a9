"""A real control plane and a process-kubelet node for this session's kube tests.

Skips (with one reason naming what is missing) when the control plane cannot
run here: no binaries (`python3 dev.py kube-binaries` builds them, needs Go) or
no root. Each test gets a fresh namespace, deleted afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from tests.kube.api import ApiError, KubeApi
from tests.kube.cluster import KubeCluster, kubelet_scratch, running_cluster
from tests.kube.controlplane import unavailable_reason


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
