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
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import kmock
from kopf.testing import KopfRunner

from butlers.db.provision import deprovision
from butlers.db.readers import dashboard_role, dashboard_schema
from butlers.roster import is_switchboard, load_roster
from butlers.waiting import wait_until
from butlers_operator.auth import NAMESPACE_SECRET, SECRETS_KEY_KEY, USER_TOKEN_KEY
from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings
from butlers_operator.target import build_schema_name
from tests.support.forward_proxy import forward_proxy
from tests.support.kube_emulator import declare_cluster

from .dashboard_chart import (
    build_dashboard_env,
    find_dashboard,
    new_dashboard_token,
    render_chart,
)
from .ecosystem import ButlerEndpoint, EcosystemHandle
from .pods import LocalPod, LocalPods

BUTLERS = "butlers.dev/v1alpha1/butlers"
NAMESPACE = "butlers-e2e"
ENV_SECRET = "butlers-e2e-env"
READY_TIMEOUT = 60.0


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


def _with_condition(butlers: list[dict[str, Any]], kind: str) -> set[str]:
    """Names of the Butlers whose condition `kind` is True."""
    return {b["metadata"]["name"] for b in butlers if condition(b, kind).get("status") == "True"}


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

    async def delete(self, path: str) -> None:
        async with self.session.delete(path) as response:
            if response.status >= 300 and response.status != 404:
                raise OperatorBackendError(f"DELETE {path}: {await response.text()}")

    async def items(self, group_version: str, plural: str) -> list[dict[str, Any]]:
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        async with self.session.get(f"{prefix}/namespaces/{self.namespace}/{plural}") as response:
            response.raise_for_status()
            return list((await response.json()).get("items") or [])

    async def wait_condition(
        self, names: set[str], kind: str, timeout: float = READY_TIMEOUT
    ) -> None:
        """Until every named Butler reports the condition `kind` True."""
        butlers: list[dict[str, Any]] = []

        async def all_true() -> bool:
            butlers[:] = await self.items("butlers.dev/v1alpha1", "butlers")
            return names <= _with_condition(butlers, kind)

        def problem() -> str:
            reasons = {b["metadata"]["name"]: condition(b, kind).get("message") for b in butlers}
            missing = sorted(names - _with_condition(butlers, kind))
            return f"{kind} not True after {timeout:.0f} s for {missing}: {reasons}"

        await wait_until(all_true, timeout=timeout, message=problem, error=OperatorBackendError)

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


async def start_dashboard(
    cluster: FakeCluster, pods: LocalPods, deployment: Mapping[str, Any]
) -> LocalPod:
    """The chart's dashboard Deployment as a local pod (after the operator wrote its Secrets)."""
    secrets = {s["metadata"]["name"]: s for s in await cluster.items("v1", "secrets")}
    maps = {m["metadata"]["name"]: m for m in await cluster.items("v1", "configmaps")}
    pod = pods.add(deployment, secrets, maps)
    await pod.run_init()
    await pod.start()
    return pod


async def read_secret(cluster: FakeCluster, name: str) -> dict[str, str]:
    secrets = {s["metadata"]["name"]: s for s in await cluster.items("v1", "secrets")}
    data = (secrets.get(name) or {}).get("data") or {}
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


async def read_tokens(cluster: FakeCluster, names: list[str]) -> tuple[str, dict[str, str]]:
    """The user's token and each butler's own, from the Secrets the operator made."""
    user, tokens, _key = await read_auth(cluster, names)
    return user, tokens


async def read_auth(cluster: FakeCluster, names: list[str]) -> tuple[str, dict[str, str], str]:
    """`read_tokens`, and the keyring of the secrets stores."""
    secrets = {s["metadata"]["name"]: s for s in await cluster.items("v1", "secrets")}

    def value(secret: str, key: str) -> str:
        data = (secrets.get(secret) or {}).get("data") or {}
        if key not in data:
            raise OperatorBackendError(f"Secret {secret} has no key {key!r}")
        return base64.b64decode(data[key]).decode()

    user = value(NAMESPACE_SECRET, USER_TOKEN_KEY)
    tokens = {name: value(f"{name}-auth", "token") for name in names}
    return user, tokens, value(NAMESPACE_SECRET, SECRETS_KEY_KEY)


async def wait_registered(
    handle: EcosystemHandle, switchboard: str, expected: Mapping[str, str]
) -> None:
    """Until the switchboard's registry lists every butler (name → URL as advertised)."""
    registered: dict[str, str] = {}

    def missing() -> list[str]:
        return sorted(n for n, url in expected.items() if registered.get(n) != url)

    async def all_registered() -> bool:
        rows = await handle.call(switchboard, "butler_registry_list", {}) or []
        registered.clear()
        registered.update({r["name"]: r["url"] for r in rows})
        return not missing()

    await wait_until(
        all_registered,
        timeout=READY_TIMEOUT,
        message=lambda: (
            f"not registered with the switchboard after {READY_TIMEOUT:.0f} s: "
            f"{missing()} (registered: {registered})"
        ),
        error=OperatorBackendError,
    )


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
    async with (
        kmock.KubernetesEmulator() as emulator,
        kmock.Server(emulator),
        # Cluster DNS for the dashboard: Service names → the local pods serving them.
        forward_proxy(lambda host, port: pods.hosts.get(f"{host}:{port}")) as proxy,
    ):
        declare_cluster(emulator, NAMESPACE)
        url = str(emulator.url).rstrip("/")
        # The chart, rendered as `helm install` would into the butlers' namespace: the
        # dashboard's Deployment and token, and the Secret the operator fills for it.
        chart = find_dashboard(
            render_chart(
                NAMESPACE,
                {
                    "database": {"adminSecret": {"name": "admin"}, "schemaPrefix": schema_prefix},
                    "butlerEnvSecret": ENV_SECRET,
                    "dashboard": {
                        "token": new_dashboard_token(),
                        "env": build_dashboard_env(proxy.url, ["127.0.0.1", "localhost"], url),
                    },
                },
            )
        )
        settings = OperatorSettings(
            namespaces=(NAMESPACE,),
            operator_namespace=NAMESPACE,
            admin_dsn=admin_dsn,
            schema_prefix=schema_prefix,
            butler_env_secret=ENV_SECRET,
            dashboard_secret=chart.database_secret,
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
                token_secret = dict(chart.token_secret)
                token_secret["metadata"] = {**token_secret["metadata"], "resourceVersion": "1"}
                await cluster.create(f"/api/v1/namespaces/{NAMESPACE}/secrets", token_secret)
                # The switchboard first, so every other butler's first rendering names it
                # (otherwise they would only pick it up at the next resync).
                for resource in sorted(resources, key=lambda r: not is_switchboard(r)):
                    await cluster.create(
                        butlers_path, build_butler_object(resource.to_manifest(), NAMESPACE)
                    )
                await cluster.wait_condition({r.name for r in resources}, "DatabaseReady")
                switchboards = [r.name for r in resources if is_switchboard(r)]
                endpoints = await start_pods(cluster, pods)
                user_token, butler_tokens, keyring = await read_auth(cluster, list(endpoints))
                key_file = pods.log_dir / "secrets.key"
                key_file.write_text(keyring + "\n")
                dashboard = await start_dashboard(cluster, pods, chart.deployment)
                database = await read_secret(cluster, chart.database_secret)
                handle = EcosystemHandle(
                    backend="operator",
                    endpoints=endpoints,
                    admin_dsn=admin_dsn,
                    token=user_token,
                    butler_tokens=butler_tokens,
                    kill=lambda name: pods.by_service[name].kill(),
                    restart=lambda name: pods.by_service[name].restart(),
                    pid=lambda name: pods.by_service[name].pid,
                    log_dir=pods.log_dir,
                    secrets_key_file=key_file,
                    schema_prefix=schema_prefix,
                    # The pods are processes of this machine: their span files are here too.
                    span_dir=Path(extra_env["BUTLERS_SPAN_DIR"])
                    if extra_env and extra_env.get("BUTLERS_SPAN_DIR")
                    else None,
                    dashboard_url=f"{dashboard.base_url}/",
                    dashboard_token=chart.token,
                    dashboard_dsn=database["dsn"],
                    dashboard_schema=database["schema"],
                    kill_dashboard=dashboard.kill,
                    restart_dashboard=dashboard.restart,
                )

                async def apply_butler(manifest: dict[str, Any]) -> None:
                    await cluster.create(butlers_path, build_butler_object(manifest, NAMESPACE))

                async def delete_butler(name: str) -> None:
                    await cluster.delete(f"{butlers_path}/{name}")
                    await deprovision(admin_dsn, build_schema_name(NAMESPACE, name, schema_prefix))

                handle.apply_butler, handle.delete_butler = apply_butler, delete_butler
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
                await deprovision(
                    admin_dsn, dashboard_schema(schema_prefix), role=dashboard_role(schema_prefix)
                )
