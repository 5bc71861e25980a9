"""The `operator` backend: the real operator, a fake Kubernetes API, pods as local processes.

kmock's Kubernetes emulator serves the API from the session's loop; the operator
runs under `KopfRunner` (its own thread and loop) with the session's PostgreSQL
as its admin database and the session's schema prefix. Every roster Butler is
applied unchanged but for its namespace; the e2e environment reaches the pods
the way any site-wide setting would: a Secret the operator renders into every
butler container (`butlerEnvSecret`). Each Deployment the operator renders is
then started from its pod spec (`pods.LocalPods`), which proves that what the
operator renders boots a working butler.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import kmock
from kopf.testing import KopfRunner

from butlers.db.provision import deprovision
from butlers.roster import load_roster
from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings
from butlers_operator.target import build_schema_name
from tests.support.kube_emulator import declare_cluster

from .ecosystem import ButlerEndpoint, EcosystemHandle
from .pods import LocalPods

BUTLERS = "butlers.dev/v1alpha1/butlers"
NAMESPACE = "butlers-e2e"
ENV_SECRET = "butlers-e2e-env"
READY_TIMEOUT = 60.0
SWITCHBOARD = "switchboard"  # the module that makes a butler the switchboard


class OperatorBackendError(RuntimeError):
    """The operator did not get the roster to a startable state."""


def build_env_secret(namespace: str, env: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": ENV_SECRET, "namespace": namespace, "resourceVersion": "1"},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in env.items()},
    }


def build_butler_object(manifest: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """A roster file as `kubectl apply` would create it (the emulator sets no uid)."""
    document = {**manifest, "metadata": dict(manifest["metadata"])}
    name = document["metadata"]["name"]
    document["metadata"] |= {
        "namespace": namespace,
        "uid": f"uid-{name}",
        "generation": 1,
        "resourceVersion": "1",
    }
    return document


def condition(butler: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    conditions = (butler.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


class FakeCluster:
    """What a user does with kubectl, over HTTP against the emulator."""

    def __init__(self, session: aiohttp.ClientSession, namespace: str) -> None:
        self.session = session
        self.namespace = namespace

    async def create(self, path: str, document: Mapping[str, Any]) -> None:
        async with self.session.post(path, json=document) as response:
            if response.status >= 300:
                raise OperatorBackendError(f"POST {path}: {await response.text()}")

    async def items(self, group_version: str, plural: str) -> list[dict[str, Any]]:
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        async with self.session.get(f"{prefix}/namespaces/{self.namespace}/{plural}") as response:
            response.raise_for_status()
            return list((await response.json()).get("items") or [])

    async def wait_condition(
        self, names: set[str], kind: str, timeout: float = READY_TIMEOUT
    ) -> None:
        """Until every named Butler reports the condition `kind` True."""
        deadline = time.monotonic() + timeout
        while True:
            butlers = await self.items("butlers.dev/v1alpha1", "butlers")
            ready = {
                b["metadata"]["name"] for b in butlers if condition(b, kind).get("status") == "True"
            }
            if names <= ready:
                return
            if time.monotonic() > deadline:
                reasons = {
                    b["metadata"]["name"]: condition(b, kind).get("message") for b in butlers
                }
                raise OperatorBackendError(
                    f"{kind} not True after {timeout:.0f} s for {sorted(names - ready)}: {reasons}"
                )
            await asyncio.sleep(0.05)

    async def report_rollouts(self) -> None:
        """What the Deployment controller and kubelet report once every pod is ready.

        The operator derives each Butler's Ready from this status (its Deployment watch).
        """
        for deployment in await self.items("apps/v1", "deployments"):
            meta = deployment["metadata"]
            status = {
                "observedGeneration": meta.get("generation") or 1,
                "replicas": 1,
                "updatedReplicas": 1,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                ],
            }
            path = f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{meta['name']}"
            headers = {"Content-Type": "application/merge-patch+json"}
            async with self.session.patch(
                path, json={"status": status}, headers=headers
            ) as response:
                if response.status >= 300:
                    raise OperatorBackendError(f"PATCH {path}: {await response.text()}")


@asynccontextmanager
async def running_operator(settings: OperatorSettings, namespace: str) -> AsyncIterator[None]:
    """The real operator in its own thread, stopped (off this loop) on exit."""
    runner = KopfRunner(
        ["run", "--standalone", "--namespace", namespace],
        registry=build_registry(settings),
        settings=build_kopf_settings(settings),
        timeout=30,
    )
    await asyncio.to_thread(runner.__enter__)
    try:
        yield
    finally:
        await asyncio.to_thread(runner.__exit__, None, None, None)


async def start_pods(cluster: FakeCluster, pods: LocalPods) -> dict[str, ButlerEndpoint]:
    """Every rendered Deployment as a local pod; each Service mapped to its pod's port.

    Endpoints are named after Services; `pods.by_service` maps them to their pods.
    """
    secrets = {s["metadata"]["name"]: s for s in await cluster.items("v1", "secrets")}
    maps = {m["metadata"]["name"]: m for m in await cluster.items("v1", "configmaps")}
    deployments = await cluster.items("apps/v1", "deployments")
    for deployment in deployments:
        pods.add(deployment, secrets, maps)
    exposed = {
        service["metadata"]["name"]: pods.expose(service, deployments)
        for service in await cluster.items("v1", "services")
    }
    await pods.start_all()
    return {
        name: ButlerEndpoint(
            name=name,
            url=f"{pod.base_url}/mcp",
            sse_url=f"{pod.base_url}/sse",
            port=pod.port,
            schema=pod.main.env["BUTLERS_SCHEMA"],
            dsn=pod.main.env["BUTLERS_DSN"],
        )
        for name, pod in exposed.items()
    }


async def wait_registered(
    handle: EcosystemHandle, switchboard: str, expected: Mapping[str, str]
) -> None:
    """Until the switchboard's registry lists every butler (name → URL as advertised)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        rows = await handle.call(switchboard, "butler_registry_list", {}) or []
        registered = {r["name"]: r["url"] for r in rows}
        missing = {n for n, url in expected.items() if registered.get(n) != url}
        if not missing:
            return
        if time.monotonic() > deadline:
            raise OperatorBackendError(
                f"not registered with the switchboard after {READY_TIMEOUT:.0f} s: "
                f"{sorted(missing)} (registered: {registered})"
            )
        await asyncio.sleep(0.05)


@asynccontextmanager
async def operator_ecosystem(
    *,
    admin_dsn: str,
    roster_dir: Path,
    data_dir: Path,
    schema_prefix: str,
    extra_env: dict[str, str] | None = None,
    keep_schemas: bool = False,
) -> AsyncIterator[EcosystemHandle]:
    resources = load_roster(roster_dir)
    # The schemas the operator provisions on first reconcile (dropped at the end).
    schemas = [build_schema_name(NAMESPACE, r.name, schema_prefix) for r in resources]
    pods = LocalPods(data_dir)
    butlers_path = f"/apis/{BUTLERS.rsplit('/', 1)[0]}/namespaces/{NAMESPACE}/butlers"
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare_cluster(emulator, NAMESPACE)
        url = str(emulator.url).rstrip("/")
        settings = OperatorSettings(
            namespaces=(NAMESPACE,),
            admin_dsn=admin_dsn,
            schema_prefix=schema_prefix,
            butler_env_secret=ENV_SECRET,
            kube_server=url,
            resync_seconds=30.0,
            retry_base_seconds=0.2,
            retry_max_seconds=2.0,
        )
        try:
            async with (
                aiohttp.ClientSession(base_url=url) as session,
                running_operator(settings, NAMESPACE),
            ):
                cluster = FakeCluster(session, NAMESPACE)
                await cluster.create(
                    f"/api/v1/namespaces/{NAMESPACE}/secrets",
                    build_env_secret(NAMESPACE, extra_env or {}),
                )
                # The switchboard first, so every other butler's first rendering names it
                # (otherwise they would only pick it up at the next resync).
                for resource in sorted(resources, key=lambda r: SWITCHBOARD not in r.spec.modules):
                    await cluster.create(
                        butlers_path, build_butler_object(resource.to_manifest(), NAMESPACE)
                    )
                await cluster.wait_condition({r.name for r in resources}, "DatabaseReady")
                switchboards = [r.name for r in resources if SWITCHBOARD in r.spec.modules]
                handle = EcosystemHandle(
                    backend="operator",
                    endpoints=await start_pods(cluster, pods),
                    admin_dsn=admin_dsn,
                    kill=lambda name: pods.by_service[name].kill(),
                    restart=lambda name: pods.by_service[name].restart(),
                    log_dir=pods.log_dir,
                    # The pods are processes of this machine: their span files are here too.
                    span_dir=Path(extra_env["BUTLERS_SPAN_DIR"])
                    if extra_env and extra_env.get("BUTLERS_SPAN_DIR")
                    else None,
                )
                try:
                    # The pods are up: report it as a cluster would; the operator turns
                    # that into Ready on every Butler.
                    await cluster.report_rollouts()
                    await cluster.wait_condition({r.name for r in resources}, "Ready")
                    if switchboards:
                        # Service URLs resolve to local ports here: that is what they advertise.
                        local = {n: e.url for n, e in handle.endpoints.items()}
                        await wait_registered(handle, switchboards[0], local)
                    yield handle
                finally:
                    await handle.close()
        finally:
            await pods.stop_all()
            if not keep_schemas:
                for schema in schemas:
                    await deprovision(admin_dsn, schema)
