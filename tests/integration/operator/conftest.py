"""Fixtures for the operator's integration tests: real PostgreSQL, kmock, a running operator.

The operator runs under `kopf.testing.KopfRunner` (its own thread and loop)
against kmock's Kubernetes emulator, which serves from the test's loop.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import kmock
import pytest
import yaml
from kopf.testing import KopfRunner

from butlers.waiting import wait_until
from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings
from tests.support.kube_emulator import VersionedEmulator, declare_cluster

BUTLERS = "butlers.dev/v1alpha1/butlers"
NAMESPACE = "home"
DEADLINE = 30.0


@pytest.fixture
def kmock_options(kmock_options: dict[str, Any]) -> dict[str, Any]:
    """kmock with resourceVersions that move, as kopf's consistency wait needs (the
    emulator's docstring says what goes wrong without)."""
    return {**kmock_options, "cls": VersionedEmulator}


@pytest.fixture(scope="session")
def operator_admin_dsn(pg_admin_dsn: str) -> str:
    """The operator's admin database: the session's PostgreSQL."""
    return pg_admin_dsn


@pytest.fixture
def schema_prefix(session_tag: str) -> str:
    """Under the session's tag, so a crashed session's operator schemas are swept too."""
    return f"{session_tag}op{secrets.token_hex(2)}_"


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], what: str, deadline: float = DEADLINE
) -> Any:
    """Poll `check` until it returns something truthy, or fail after `deadline` seconds."""
    return await wait_until(
        check,
        timeout=deadline,
        message=f"timed out after {deadline} s waiting for {what}",
        error=AssertionError,
    )


@asynccontextmanager
async def running_operator(
    settings: OperatorSettings,
    liveness: str | None = None,
    events: list[tuple[str, str, str, str]] | None = None,
) -> AsyncIterator[KopfRunner]:
    """The real operator, watching the settings' namespaces, stopped (off this loop) on exit.

    With `events`, the Events it posts are recorded there as (butler, type, reason,
    message) instead (kmock keeps one Event at most: it has no `generateName`).
    """
    args = ["run", "--standalone"]
    for namespace in settings.namespaces:
        args += ["--namespace", namespace]
    if liveness:
        args += ["--liveness", liveness]
    runner = KopfRunner(
        args,
        registry=build_registry(settings, **_event_sink(events)),
        settings=build_kopf_settings(settings),
        timeout=30,
    )
    runner.__enter__()
    try:
        yield runner
    finally:
        await asyncio.to_thread(runner.__exit__, None, None, None)


def _event_sink(events: list[tuple[str, str, str, str]] | None) -> dict[str, Any]:
    if events is None:
        return {}

    def record(body: Any, kind: str, reason: str, message: str) -> None:
        events.append((body["metadata"]["name"], kind, reason, message))

    return {"events": record}


@pytest.fixture
def make_settings(
    kmock: kmock.KubernetesEmulator, operator_admin_dsn: str, schema_prefix: str
) -> Callable[..., OperatorSettings]:
    declare_cluster(kmock, NAMESPACE)

    def make(**overrides: Any) -> OperatorSettings:
        values: dict[str, Any] = {
            "namespaces": (NAMESPACE,),
            "admin_dsn": operator_admin_dsn,
            "schema_prefix": schema_prefix,
            "kube_server": str(kmock.url).rstrip("/"),
            "resync_seconds": 1.0,
            "retry_base_seconds": 0.2,
            "retry_max_seconds": 1.0,
        }
        return OperatorSettings(**(values | overrides))

    return make


async def fetch(dsn: str, query: str, *args: Any) -> Any:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def execute(dsn: str, script: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(script)
    finally:
        await conn.close()


ROOT = Path(__file__).resolve().parents[3]
KINDS = {
    "Secret": "/api/v1/namespaces/{ns}/secrets/{name}-db",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps/{name}-spec",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
    "Service": "/api/v1/namespaces/{ns}/services/{name}",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts/{name}",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}",
}
BUTLERS_PATH = f"/apis/butlers.dev/v1alpha1/namespaces/{NAMESPACE}/butlers"


def butlers_path(namespace: str = NAMESPACE) -> str:
    return f"/apis/butlers.dev/v1alpha1/namespaces/{namespace}/butlers"


class Cluster:
    """What a user does with kubectl, over HTTP against the emulator."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def get(self, path: str) -> dict[str, Any] | None:
        async with self.session.get(path) as resp:
            return None if resp.status == 404 else await resp.json()

    async def create_butler(
        self, name: str, namespace: str = NAMESPACE, roster: str = "health", **spec: Any
    ) -> dict[str, Any]:
        document = yaml.safe_load((ROOT / "roster" / f"{roster}.yaml").read_text())
        document["metadata"] |= {
            "name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
            "generation": 1, "resourceVersion": "1",
        }  # fmt: skip
        document["spec"] |= spec
        async with self.session.post(butlers_path(namespace), json=document) as resp:
            assert resp.status < 300, await resp.text()
            return await resp.json()

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.session.patch(path, json=body, headers=headers) as resp:
            assert resp.status < 300, await resp.text()

    async def delete(self, path: str) -> None:
        async with self.session.delete(path) as resp:
            assert resp.status < 300, await resp.text()

    async def butler(self, name: str, namespace: str = NAMESPACE) -> dict[str, Any] | None:
        return await self.get(f"{butlers_path(namespace)}/{name}")

    async def condition(self, name: str, kind: str, namespace: str = NAMESPACE) -> dict[str, Any]:
        butler = await self.butler(name, namespace) or {}
        conditions = (butler.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == kind), {})

    async def owned(
        self, name: str, kind: str, namespace: str = NAMESPACE
    ) -> dict[str, Any] | None:
        return await self.get(KINDS[kind].format(ns=namespace, name=name))

    async def report_rollout(
        self, name: str, *, generation: int, observed: int, ready: bool = True, **extra: Any
    ) -> None:
        """Play the Deployment controller: its generation and the status it reports."""
        status = {
            "observedGeneration": observed,
            "replicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1 if ready else 0,
            "availableReplicas": 1 if ready else 0,
            **extra,
        }
        path = KINDS["Deployment"].format(ns=NAMESPACE, name=name)
        await self.patch(path, {"metadata": {"generation": generation}, "status": status})


@pytest.fixture
async def cluster(kmock) -> Any:  # type: ignore[no-untyped-def]
    async with aiohttp.ClientSession(base_url=str(kmock.url)) as session:
        yield Cluster(session)
