"""The `apiserver` backend: the documented user path on a real control plane.

A control plane built from Go modules and a process kubelet (`tests/kube`) per
session; then exactly what a user does (`userpath`): both charts installed with
helm-python-sdk, the operator running as a pod under its own ServiceAccount and
RBAC, `kubectl apply -f roster/`, `kubectl wait` for `Ready`. The operator's
PostgreSQL is the session's (an admin Secret the chart is pointed at); the e2e
environment reaches the butler pods through the chart's `butlerEnvSecret`.
This machine reaches each butler through the service proxy, at an address
that stays the same when its pod is replaced.

`kill` crashes a butler's container and keeps it down (its pod turns NotReady,
its Service has no Ready endpoint); `restart` lets a killed container start
again, or else deletes the pod so its ReplicaSet replaces it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from butlers.db.provision import deprovision
from butlers.roster import is_switchboard
from butlers.spec import schema_name
from butlers_operator.auth import NAMESPACE_SECRET, SECRETS_KEY_KEY, USER_TOKEN_KEY
from butlers_operator.target import build_schema_name
from tests.kube.api import build_path
from tests.kube.cluster import KubeCluster, kubelet_scratch, running_cluster
from tests.kube.controlplane import unavailable_reason
from tests.kube.wait import condition_status, wait_until
from tests.support.forward_proxy import forward_proxy

from . import userpath
from .dashboard_chart import build_dashboard_env
from .ecosystem import ButlerEndpoint, EcosystemHandle
from .operator import wait_registered

ADMIN_SECRET = "butlers-e2e-admin"
BUTLER_CONTAINER = "butler"
BUTLER_LABEL = "butlers.dev/butler"
RESTART_TIMEOUT = 90.0
# The chart's dashboard (release `butlers`): its Deployment, Service and token Secret.
DASHBOARD = "butlers-dashboard"
DASHBOARD_TIMEOUT = 60.0

__all__ = ["apiserver_ecosystem", "unavailable_reason"]


def build_chart_values(
    schema_prefix: str, dashboard_env: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The operator chart for one session: the session's database, the e2e env Secret,
    and the dashboard's extra environment (its token is the one the chart generates)."""
    values: dict[str, Any] = {
        "butlerEnvSecret": userpath.ENV_SECRET,
        "database": {"adminSecret": {"name": ADMIN_SECRET}, "schemaPrefix": schema_prefix},
        "resyncSeconds": 5,
    }
    if dashboard_env:
        values["dashboard"] = {"env": dashboard_env}
    return values


class ButlerPods:
    """kill/restart of a butler's pod, as a crash and as a replacement."""

    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.held: dict[str, str] = {}  # butler → pod whose container is held down

    async def _running_pod(self, butler: str) -> dict[str, Any]:
        async with self.cluster.api() as api:
            pods = await api.list(
                build_path("v1", "pods", self.namespace), labelSelector=f"{BUTLER_LABEL}={butler}"
            )
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if len(live) != 1:
            raise AssertionError(f"expected one live pod of {butler}, found {len(live)}")
        return live[0]

    async def pod_names(self, butler: str) -> set[str]:
        async with self.cluster.api() as api:
            pods = await api.list(
                build_path("v1", "pods", self.namespace), labelSelector=f"{BUTLER_LABEL}={butler}"
            )
        return {p["metadata"]["name"] for p in pods}

    async def wait_replaced(self, butler: str, old: set[str]) -> None:
        """Until `butler` runs one Ready pod, none of `old` (its rollout done)."""

        async def replaced() -> bool:
            try:
                pod = await self._running_pod(butler)
            except AssertionError:  # both during the rollout
                return False
            fresh = pod["metadata"]["name"] not in old
            return fresh and condition_status(pod, "Ready") == "True"

        await wait_until(replaced, f"a new Ready pod of {butler}", RESTART_TIMEOUT)
        await self.cluster.wait_service(self.namespace, butler, "mcp")

    async def kill(self, butler: str) -> None:
        pod = (await self._running_pod(butler))["metadata"]["name"]
        kubelet = self.cluster.kubelet
        await self.cluster.node.async_call(
            kubelet.crash(self.namespace, pod, BUTLER_CONTAINER, hold=True)
        )
        self.held[butler] = pod
        await wait_until(
            lambda: not self.cluster.proxy.endpoints(self.namespace, butler, "mcp"),
            f"{butler}'s Service to have no Ready endpoint",
        )

    async def restart(self, butler: str) -> None:
        held = self.held.pop(butler, None)
        async with self.cluster.api() as api:
            if held is not None:
                kubelet = self.cluster.kubelet
                await self.cluster.node.async_call(
                    kubelet.release(self.namespace, held, BUTLER_CONTAINER)
                )
            else:
                old = (await self._running_pod(butler))["metadata"]["name"]
                await api.delete(build_path("v1", "pods", self.namespace, old))

            async def ready_pod() -> bool:
                try:
                    pod = await self._running_pod(butler)
                except AssertionError:
                    return False
                replaced = held is not None or pod["metadata"]["name"] != old
                return replaced and condition_status(pod, "Ready") == "True"

            await wait_until(ready_pod, f"a Ready pod of {butler}", RESTART_TIMEOUT)
        await self.cluster.wait_service(self.namespace, butler, "mcp")


@asynccontextmanager
async def apiserver_ecosystem(
    *,
    admin_dsn: str,
    roster_dir: Path,
    data_dir: Path,
    schema_prefix: str,
    extra_env: dict[str, str] | None = None,
    keep_schemas: bool = False,
) -> AsyncIterator[EcosystemHandle]:
    env = dict(extra_env or {})
    target = userpath.Cluster(namespace=f"butlers-e2e-{secrets.token_hex(3)}")
    schemas: list[str] = []
    try:
        with kubelet_scratch("butlers-e2e-cluster-") as root:
            async with _ecosystem(
                root, target, env, admin_dsn, roster_dir, schema_prefix, schemas
            ) as handle:
                yield handle
    finally:
        if not keep_schemas:
            for schema in schemas:
                await deprovision(admin_dsn, schema)


@asynccontextmanager
async def _ecosystem(
    root: Path,
    target: userpath.Cluster,
    env: dict[str, str],
    admin_dsn: str,
    roster_dir: Path,
    schema_prefix: str,
    schemas: list[str],
) -> AsyncIterator[EcosystemHandle]:
    span_dir = Path(env["BUTLERS_SPAN_DIR"]) if env.get("BUTLERS_SPAN_DIR") else None
    if span_dir is not None:
        # Pods write their span files there (kept writable in their read-only root).
        span_dir.mkdir(parents=True, exist_ok=True)
    async with (
        running_cluster(
            root / "cluster", writable_paths=[str(span_dir)] if span_dir else []
        ) as cluster,
        # Cluster DNS for the dashboard, which learns Service URLs from the API at run time.
        forward_proxy(
            lambda host, port: cluster.proxy.lookup(target.namespace, host, port)
        ) as proxy,
    ):
        target = userpath.Cluster(namespace=target.namespace, kubeconfig=cluster.kubeconfig)
        admin = userpath.build_secret(ADMIN_SECRET, target.namespace, {"dsn": admin_dsn})
        dashboard_env = build_dashboard_env(proxy.url, [cluster.plane.address])
        resources = await userpath.install(
            target,
            values=build_chart_values(schema_prefix, dashboard_env),
            env=env,
            roster_dir=roster_dir,
            extra=[admin],
        )
        schemas[:] = [schema_name(r.name, schema_prefix) for r in resources]
        endpoints: dict[str, ButlerEndpoint] = {}
        for resource in resources:
            name = resource.name
            address = await cluster.wait_service(target.namespace, name, "mcp")
            db = await userpath.read_secret(target, f"{name}-db")
            endpoints[name] = ButlerEndpoint(
                name=name,
                url=f"http://{address}/mcp",
                sse_url=f"http://{address}/sse",
                port=int(address.rsplit(":", 1)[1]),
                schema=db["schema"],
                dsn=db["dsn"],
            )
        schemas[:] = [e.schema for e in endpoints.values()]
        pods = ButlerPods(cluster, target.namespace)
        # The tokens the operator made: the namespace's user token, each butler's own.
        namespace_auth = await userpath.read_secret(target, NAMESPACE_SECRET)
        user_token = namespace_auth[USER_TOKEN_KEY]
        key_file = cluster.log_dir() / "secrets.key"
        key_file.write_text(namespace_auth[SECRETS_KEY_KEY] + "\n")
        butler_tokens = {
            name: (await userpath.read_secret(target, f"{name}-auth"))["token"]
            for name in endpoints
        }
        dashboard_address = await cluster.wait_service(
            target.namespace, DASHBOARD, "http", DASHBOARD_TIMEOUT
        )
        dashboard_db = await userpath.read_secret(target, f"{DASHBOARD}-db")
        handle = EcosystemHandle(
            backend="apiserver",
            endpoints=endpoints,
            admin_dsn=admin_dsn,
            token=user_token,
            butler_tokens=butler_tokens,
            schema_prefix=schema_prefix,
            kill=pods.kill,
            restart=pods.restart,
            log_dir=cluster.log_dir(),
            secrets_key_file=key_file,
            span_dir=span_dir,
            dashboard_url=f"http://{dashboard_address}/",
            dashboard_token=(await userpath.read_secret(target, DASHBOARD))["token"],
            dashboard_dsn=dashboard_db["dsn"],
            dashboard_schema=dashboard_db["schema"],
        )

        async def apply_butler(manifest: dict[str, Any]) -> None:
            await userpath.apply(target, [manifest])

        async def delete_butler(name: str) -> None:
            await userpath.run(
                userpath.build_kubectl(target, "delete", "butler", name, "--wait=true")
            )
            await deprovision(admin_dsn, build_schema_name(target.namespace, name, schema_prefix))

        handle.apply_butler, handle.delete_butler = apply_butler, delete_butler

        async def set_secrets_keyring(keyring: str) -> None:
            """`secrets-key` of the namespace's Secret edited (the operator re-renders
            each Butler's Secret and rolls its pod), then the dashboard restarted."""
            before = {name: await pods.pod_names(name) for name in endpoints}
            patch = json.dumps({"stringData": {SECRETS_KEY_KEY: keyring}})
            await userpath.run(
                userpath.build_kubectl(target, "patch", "secret", NAMESPACE_SECRET, "-p", patch)
            )
            for name in endpoints:
                await pods.wait_replaced(name, before[name])
            await userpath.run(
                userpath.build_kubectl(target, "rollout", "restart", f"deployment/{DASHBOARD}")
            )
            await userpath.run(
                userpath.build_kubectl(
                    target,
                    "rollout",
                    "status",
                    f"deployment/{DASHBOARD}",
                    f"--timeout={DASHBOARD_TIMEOUT:.0f}s",
                )
            )
            await cluster.wait_service(target.namespace, DASHBOARD, "http", DASHBOARD_TIMEOUT)
            key_file.write_text(keyring + "\n")

        handle.set_secrets_keyring = set_secrets_keyring
        try:
            switchboards = [r.name for r in resources if is_switchboard(r)]
            if switchboards:
                # Each butler advertises its Service's cluster address, which the
                # kubelet resolved to the service proxy: the harness's URLs too.
                local = {n: e.url for n, e in endpoints.items()}
                await wait_registered(handle, switchboards[0], local)
            yield handle
        finally:
            await handle.close()
        await userpath.teardown(target)
