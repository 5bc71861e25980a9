"""The `kind` backend: the charts on a kind cluster, one ephemeral namespace per session.

Creates (or, with `--kube-context`, reuses) the cluster of `kind-config.yaml`,
builds and loads both images, installs the CRDs and the operator chart (with its
development PostgreSQL) into `butlers-e2e-<random>`, applies the roster, waits
for `Ready` on every Butler and port-forwards each Service and the database.
The namespace is deleted at the end unless `--keep-namespace`.

Pods reach the session's LLM script server through the host's address on kind's
Docker network, so that server listens on every interface for this backend.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import yaml

from butlers.db.embedded import free_port
from butlers.roster import load_roster
from butlers.spec import ButlerResource

from . import kind_commands as k
from .ecosystem import ButlerEndpoint, EcosystemHandle
from .operator import SWITCHBOARD, wait_registered

ROOT = Path(__file__).resolve().parents[3]
COMMAND_TIMEOUT = 900.0  # image builds are the slow part
READY_TIMEOUT = 120.0


class KindError(RuntimeError):
    """A kind, docker, helm or kubectl step failed; the message has its output."""


async def run(
    argv: Sequence[str],
    stdin: str | None = None,
    timeout: float = COMMAND_TIMEOUT,
    cwd: Path | None = None,
) -> str:
    """Run one command to completion (killed at the deadline); returns its stdout."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        raise KindError(f"{' '.join(argv)}: still running after {timeout:.0f} s") from None
    if process.returncode != 0:
        raise KindError(f"{' '.join(argv)} exited with {process.returncode}:\n{err.decode()}")
    return out.decode()


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
    try:
        await run(k.build_image_present(k.POSTGRES_IMAGE), timeout=60)
    except KindError:
        await run(k.build_pull(k.POSTGRES_IMAGE))
    await run(k.build_kind_load(target))


def render_chart(chart: Path, values: Mapping[str, Any], namespace: str) -> str:
    """The chart as YAML, with helm-python-sdk (when there is no helm binary)."""
    import helm_python as helm

    rendered = helm.Chart.load(chart).render(
        dict(values), name=k.RELEASE, namespace=namespace, is_install=True
    )
    return "\n---\n".join(text for path, text in sorted(rendered.items()) if path.endswith(".yaml"))


async def install_charts(
    target: k.KindTarget,
    schema_prefix: str,
    workdir: Path,
    script_server: tuple[str, int] | None,
) -> None:
    values = k.build_chart_values(target, schema_prefix, secrets.token_urlsafe(18), script_server)
    # CRDs are cluster-wide and shared by sessions: apply them, never own them in a release.
    await run(
        k.build_apply(target, namespaced=False),
        render_chart(ROOT / "charts" / "butlers-crds", {}, target.namespace),
    )
    await run(k.build_wait_crd_established(target))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target.namespace}}
    await run(k.build_apply(target, namespaced=False), yaml.safe_dump(namespace))
    chart = ROOT / "charts" / "butlers"
    if shutil.which("helm"):
        values_file = workdir / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        await run(k.build_helm_install(chart, values_file, target))
    else:
        await run(k.build_apply(target), render_chart(chart, values, target.namespace))


async def apply_roster(
    target: k.KindTarget, roster_dir: Path, env: Mapping[str, str]
) -> list[ButlerResource]:
    secret = {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": k.ENV_SECRET, "namespace": target.namespace},
        "data": {key: base64.b64encode(v.encode()).decode() for key, v in env.items()},
    }  # fmt: skip
    resources = load_roster(roster_dir)
    documents = k.with_namespace([r.to_manifest() for r in resources], target.namespace)
    await run(k.build_apply(target), yaml.safe_dump_all([secret, *documents]))
    return resources


async def read_secret(target: k.KindTarget, name: str) -> dict[str, str]:
    secret = json.loads(await run(k.build_kubectl(target, "get", "secret", name, "-o", "json")))
    return {key: base64.b64decode(v).decode() for key, v in (secret.get("data") or {}).items()}


async def wait_new_pod(target: k.KindTarget, butler: str, old: list[str]) -> None:
    """Until a pod other than the `old` ones is Ready (a port-forward would pick any)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not k.ready_pod_uids(await run(k.build_get_pods(target, butler)), exclude=old):
        if time.monotonic() > deadline:
            raise KindError(f"no new Ready pod of {butler} after {READY_TIMEOUT:.0f} s")
        await asyncio.sleep(0.5)


async def teardown(target: k.KindTarget) -> None:
    """Butlers first (the operator still runs their finalizers), then the namespace; bounded.

    A Butler still stuck after that gets its finalizer removed, as docs/operator.md says.
    """
    try:
        await run(k.build_delete_butlers(target), timeout=k.TEARDOWN_SECONDS + 30)
    except KindError:
        for line in (await run(k.build_list_butlers(target), timeout=60)).split():
            await run(k.build_release_finalizers(target, line.rsplit("/", 1)[-1]), timeout=60)
    await run(k.build_delete_namespace(target), timeout=k.TEARDOWN_SECONDS + 30)


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
    target = k.KindTarget.for_context(k.build_namespace(secrets.token_hex(3)), kube_context)
    forwards = PortForwards(target)
    installed = False
    try:
        await ensure_cluster(target, reuse=kube_context is not None)
        gateway = k.pick_ipv4_gateway(await run(k.build_network_inspect()))
        # A span directory on this machine means nothing in a pod: no spans on kind.
        env = {
            key: k.rewrite_host(v, gateway) if key == "BUTLERS_SCRIPT_URL" else v
            for key, v in (extra_env or {}).items()
            if key != "BUTLERS_SPAN_DIR"
        }
        script_url = env.get("BUTLERS_SCRIPT_URL")
        script_port = urlsplit(script_url).port if script_url else None
        await load_images(target)
        installed = True
        with tempfile.TemporaryDirectory(dir=data_dir) as workdir:
            await install_charts(
                target,
                schema_prefix,
                Path(workdir),
                (gateway, script_port) if script_port else None,
            )
        resources = await apply_roster(target, roster_dir, env)
        names = [r.name for r in resources]
        await run(k.build_wait_ready(target))
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
            # A new pod; the port-forward followed the old one, so reopen it on the same port
            # once the new pod (not the terminating one) is Ready.
            old = k.pod_uids(await run(k.build_get_pods(target, name)))
            await run(k.build_kill_pod(target, name))
            await wait_new_pod(target, name, old)
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
            await teardown(target)
