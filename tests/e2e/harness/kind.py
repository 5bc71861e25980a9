"""The `kind` backend: the charts on a kind cluster, one ephemeral namespace per session.

Creates (or, with `--kube-context`, reuses) the cluster of `kind-config.yaml`,
builds and loads both images, then follows the user path the `apiserver`
backend follows too (`userpath`: namespace, both charts with helm-python-sdk,
the operator chart with its development PostgreSQL, `kubectl apply -f roster/`,
`Ready`), port-forwards each Service and the database, and tears down as a user
would (Butlers, `helm uninstall`, the namespace) unless `--keep-namespace`.
Only image loading and port-forwarding are this backend's own.

Pods reach the session's LLM script server through the host's address on kind's
Docker network, so that server listens on every interface for this backend.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2 as httpx

from butlers.db.embedded import free_port

from . import kind_commands as k
from . import userpath
from .ecosystem import ButlerEndpoint, EcosystemHandle
from .operator import SWITCHBOARD, wait_registered

ROOT = Path(__file__).resolve().parents[3]
COMMAND_TIMEOUT = 900.0  # image builds are the slow part
READY_TIMEOUT = 120.0


# A kind, docker, helm or kubectl step failed; the message has its output.
KindError = userpath.UserPathError


async def run(
    argv: Sequence[str],
    stdin: str | None = None,
    timeout: float = COMMAND_TIMEOUT,
    cwd: Path | None = None,
) -> str:
    """`userpath.run`, with image builds' longer deadline."""
    return await userpath.run(argv, stdin, timeout, cwd)


class PortForwards:
    """Owner of every `kubectl port-forward` of a session: each is killed at the end."""

    def __init__(self, target: k.KindTarget) -> None:
        self.target = target
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.ports: dict[str, int] = {}

    async def open(self, service: str, remote: int, local: int | None = None) -> int:
        await self.close(service)
        local = local or self.ports.get(service) or free_port()
        self.processes[service] = await asyncio.create_subprocess_exec(
            *k.build_port_forward(self.target, service, local, remote),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.ports[service] = local
        await self._wait_listening(service, local)
        return local

    async def _wait_listening(self, service: str, port: int) -> None:
        deadline = time.monotonic() + 30
        while True:
            if self.processes[service].returncode is not None:
                raise KindError(f"kubectl port-forward to service/{service} exited")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise KindError(f"port-forward to service/{service} never listened") from None
                await asyncio.sleep(0.1)

    async def close(self, service: str) -> None:
        process = self.processes.pop(service, None)
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()

    async def close_all(self) -> None:
        for service in list(self.processes):
            await self.close(service)


async def ensure_cluster(target: k.KindTarget, reuse: bool) -> None:
    if reuse:
        return
    clusters = (await run(k.build_list_clusters())).split()
    if target.cluster not in clusters:
        await run(k.build_create_cluster(ROOT / "kind-config.yaml", target.cluster))


async def load_images(target: k.KindTarget) -> None:
    for argv in k.build_image_builds(ROOT, target):
        await run(argv, cwd=ROOT)
    await run(k.build_kind_load(target))


async def read_secret(target: k.KindTarget, name: str) -> dict[str, str]:
    secret = json.loads(await run(k.build_kubectl(target, "get", "secret", name, "-o", "json")))
    return {key: base64.b64decode(v).decode() for key, v in (secret.get("data") or {}).items()}


async def wait_ready_http(url: str, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise KindError(f"{url} not ready after {timeout:.0f} s")
            await asyncio.sleep(0.1)


@asynccontextmanager
async def kind_ecosystem(
    *,
    admin_dsn: str,  # unused: the chart's PostgreSQL holds this backend's schemas
    roster_dir: Path,
    data_dir: Path,
    schema_prefix: str,
    extra_env: dict[str, str] | None = None,
    keep_schemas: bool = False,
    kube_context: str | None = None,
    keep_namespace: bool = False,
) -> AsyncIterator[EcosystemHandle]:
    target = k.KindTarget(namespace=k.build_namespace(secrets.token_hex(3)))
    if kube_context:
        target = k.KindTarget(namespace=target.namespace, context=kube_context)
    forwards = PortForwards(target)
    cluster = userpath.Cluster(namespace=target.namespace, context=target.context)
    installed = False
    try:
        await ensure_cluster(target, reuse=kube_context is not None)
        gateway = (await run(k.build_network_gateway())).strip()
        # A span directory on this machine means nothing in a pod: no spans on kind.
        env = {
            key: k.rewrite_host(v, gateway) if key == "BUTLERS_SCRIPT_URL" else v
            for key, v in (extra_env or {}).items()
            if key != "BUTLERS_SPAN_DIR"
        }
        await load_images(target)
        installed = True
        # The user path every cluster backend shares: namespace, CRDs, env Secret, the
        # operator chart (with its own PostgreSQL here), the roster, Ready.
        resources = await userpath.install(
            cluster,
            values=k.build_chart_values(target, schema_prefix),
            env=env,
            roster_dir=roster_dir,
        )
        names = [r.name for r in resources]
        pg_port = await forwards.open(k.POSTGRES_SERVICE, 5432)
        admin_secret = await read_secret(target, k.POSTGRES_ADMIN_SECRET)
        admin = k.rewrite_host(admin_secret["dsn"], "127.0.0.1", pg_port)
        endpoints: dict[str, ButlerEndpoint] = {}
        remotes: dict[str, int] = {}
        for name in names:
            service = json.loads(
                await run(k.build_kubectl(target, "get", "service", name, "-o", "json"))
            )
            remotes[name] = service["spec"]["ports"][0]["port"]
            local = await forwards.open(name, remotes[name])
            db = await read_secret(target, f"{name}-db")
            endpoints[name] = ButlerEndpoint(
                name=name,
                url=f"http://127.0.0.1:{local}/mcp",
                sse_url=f"http://127.0.0.1:{local}/sse",
                port=local,
                schema=db["schema"],
                dsn=k.rewrite_host(db["dsn"], "127.0.0.1", pg_port),
            )

        async def kill(name: str) -> None:
            await run(k.build_kill_pod(target, name))

        async def restart(name: str) -> None:
            # A new pod; the port-forward followed the old one, so reopen it on the same port.
            await run(k.build_kill_pod(target, name))
            await run(k.build_rollout_status(target, name))
            await forwards.open(name, remotes[name])
            await wait_ready_http(f"http://127.0.0.1:{endpoints[name].port}/ready")

        handle = EcosystemHandle(
            backend="kind", endpoints=endpoints, admin_dsn=admin, kill=kill, restart=restart
        )
        try:
            switchboards = [r.name for r in resources if SWITCHBOARD in r.spec.modules]
            if switchboards:
                advertised = {
                    n: f"http://{n}.{target.namespace}.svc:{remotes[n]}/mcp" for n in names
                }
                await wait_registered(handle, switchboards[0], advertised)
            yield handle
        finally:
            await handle.close()
    finally:
        await forwards.close_all()
        if installed and not keep_namespace:
            await userpath.teardown(cluster)
