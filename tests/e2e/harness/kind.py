"""The `kind` backend: the charts on a kind cluster, one ephemeral namespace per session.

Creates (or, with `--kube-context`, reuses) the cluster of `kind-config.yaml`,
builds and loads both images, then follows the user path the `apiserver`
backend follows too (`userpath`: namespace, both charts with helm-python-sdk,
the operator chart with its development PostgreSQL, `kubectl apply -f roster/`,
`Ready`), port-forwards each Service and the database, and tears down as a user
would (Butlers, `helm uninstall`, the namespace) unless `--keep-namespace`.
Only image loading and port-forwarding are this backend's own.

Pods reach the session's LLM script server, Telegram stand-in and CalDAV server
(Radicale) through the host's address on kind's Docker network, so those servers listen
on every interface for this backend; a solo butler the switchboard calls (`host_listener`)
listens on that address, at a port the extra egress rule allows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx2 as httpx

from butlers.db.embedded import free_port
from butlers.roster import is_switchboard
from butlers.waiting import wait_until
from butlers_operator.auth import NAMESPACE_SECRET, USER_TOKEN_KEY

from . import kind_commands as k
from . import userpath
from .ecosystem import ButlerEndpoint, EcosystemHandle
from .operator import wait_registered

ROOT = Path(__file__).resolve().parents[3]
COMMAND_TIMEOUT = 900.0  # image builds are the slow part
READY_TIMEOUT = 120.0
POLL_SECONDS = 3.0
HOST_SERVER_URLS = ("BUTLERS_SCRIPT_URL", *k.EXTRA_HOST_URLS)
POD_SPAN_DIR = "/tmp/spans"  # the pod's emptyDir (operator/render.py)


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


class _Forward:
    """One `kubectl port-forward`, restarted by a thread of its own whenever it exits.

    A thread, not a task of the session's event loop: synchronous tests (the node tests'
    kubectl calls) hold that loop for minutes, and the forward must come back meanwhile.
    kubectl keeps listening after its pod is gone (it exits only at the next connection,
    which fails), so `PortForwards` ends a forward whose pod left the Service's
    endpoints or terminates; it is reopened once the Service has a Ready pod again.
    """

    def __init__(self, argv: list[str], ready_pods: Callable[[], frozenset[str] | None]) -> None:
        self.argv = argv
        self.ready_pods = ready_pods
        self.bound: frozenset[str] | None = None  # the Ready pods when it was opened
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.process = self._spawn()
        self.thread = threading.Thread(target=self._watch, name=f"port-forward {argv[-2]}")
        self.thread.daemon = True

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _watch(self) -> None:
        while True:
            self.process.wait()
            while not self.stopped.wait(1.0):
                if self.ready_pods():
                    break
            with self.lock:
                if self.stopped.is_set():
                    return
                self.bound = self.ready_pods()
                self.process = self._spawn()

    def check(self, pods: tuple[frozenset[str], frozenset[str]]) -> None:
        """Ends the forward when a pod it may be bound to is gone or terminating."""
        ready, present = pods
        with self.lock:
            if self.bound is None:
                self.bound = ready
            elif not self.bound <= present and self.process.poll() is None:
                self.process.kill()

    def exited(self) -> bool:
        return self.process.poll() is not None

    def stop(self) -> None:
        self.stopped.set()
        with self.lock:
            process = self.process
        if process.poll() is None:
            process.kill()
        process.wait()
        if self.thread.is_alive():
            self.thread.join(timeout=5)


class PortForwards:
    """Owner of every `kubectl port-forward` of a session: each is killed at the end.

    A port-forward to a Service is bound to one of its pods; each is watched and reopened
    on the same local port when that pod goes (a restarted pod, the database's included,
    is reachable again at the same address). One thread lists the namespace's
    EndpointSlices every few seconds for all of them.
    """

    def __init__(self, target: k.KindTarget) -> None:
        self.target = target
        self.forwards: dict[str, _Forward] = {}
        self.ports: dict[str, int] = {}
        self.ready: dict[str, frozenset[str]] | None = None
        self.polling = threading.Event()
        self.poller = threading.Thread(target=self._poll, name="port-forward endpoints")
        self.poller.daemon = True

    def _poll(self) -> None:
        argv = k.build_kubectl(self.target, "get", "endpointslices", "-o", "json")
        while not self.polling.wait(POLL_SECONDS):
            with contextlib.suppress(subprocess.TimeoutExpired):
                done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
                if done.returncode == 0:
                    pods = k.pods_by_service(done.stdout)
                    self.ready = {service: ready for service, (ready, _) in pods.items()}
                    for service, forward in list(self.forwards.items()):
                        forward.check(pods.get(service, (frozenset(), frozenset())))

    def _ready_pods(self, service: str) -> frozenset[str] | None:
        return None if self.ready is None else self.ready.get(service, frozenset())

    async def open(self, service: str, remote: int, local: int | None = None) -> int:
        await self.close(service)
        port = self.ports[service] = local or self.ports.get(service) or free_port()
        forward = _Forward(
            k.build_port_forward(self.target, service, port, remote),
            lambda: self._ready_pods(service),
        )
        self.forwards[service] = forward
        await self._wait_listening(service, forward, port)
        forward.thread.start()
        if not self.poller.is_alive():
            self.poller.start()
        return port

    async def _wait_listening(self, service: str, forward: _Forward, port: int) -> None:
        async def listening() -> bool:
            if forward.exited():
                raise KindError(f"kubectl port-forward to service/{service} exited")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            writer.close()
            await writer.wait_closed()
            return True

        try:
            await wait_until(
                listening,
                timeout=30,
                interval=0.1,
                message=f"port-forward to service/{service} never listened",
                error=KindError,
            )
        except BaseException:
            await asyncio.to_thread(forward.stop)
            self.forwards.pop(service, None)
            raise

    async def close(self, service: str) -> None:
        forward = self.forwards.pop(service, None)
        if forward is not None:
            await asyncio.to_thread(forward.stop)

    async def close_all(self) -> None:
        self.polling.set()
        for service in list(self.forwards):
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
    if not k.node_postgres_image():
        try:
            await run(k.build_image_present(k.POSTGRES_IMAGE), timeout=60)
        except KindError:
            await run(k.build_pull(k.POSTGRES_IMAGE))
    api = await run(k.build_engine_api_version(), timeout=60)
    with tempfile.TemporaryDirectory(prefix="butlers-kind-load-") as folder:
        archive = Path(folder) / "images.tar"
        for argv in k.build_kind_load(target, archive, with_platform=k.save_takes_platform(api)):
            await run(argv)


async def read_secret(target: k.KindTarget, name: str) -> dict[str, str]:
    secret = json.loads(await run(k.build_kubectl(target, "get", "secret", name, "-o", "json")))
    return {key: base64.b64decode(v).decode() for key, v in (secret.get("data") or {}).items()}


async def wait_new_pod(target: k.KindTarget, butler: str, old: list[str]) -> None:
    """Until a pod other than the `old` ones is Ready (a port-forward would pick any)."""

    async def new_pod_ready() -> bool:
        return bool(k.ready_pod_uids(await run(k.build_get_pods(target, butler)), exclude=old))

    await wait_until(
        new_pod_ready,
        timeout=READY_TIMEOUT,
        interval=0.5,
        message=f"no new Ready pod of {butler} after {READY_TIMEOUT:.0f} s",
        error=KindError,
    )


async def wait_no_ready_endpoint(target: k.KindTarget, butler: str) -> None:
    """Until the butler's Service has no Ready endpoint (calls to it are refused)."""

    async def none_ready() -> bool:
        slices = await run(k.build_kubectl(target, "get", "endpointslices", "-o", "json"))
        ready, _ = k.pods_by_service(slices).get(butler, (frozenset(), frozenset()))
        return not ready

    await wait_until(
        none_ready,
        timeout=READY_TIMEOUT,
        interval=0.5,
        message=f"{butler}'s Service still has a Ready endpoint after {READY_TIMEOUT:.0f} s",
        error=KindError,
    )


async def wait_ready_http(url: str, timeout: float = READY_TIMEOUT) -> None:
    async with httpx.AsyncClient(timeout=2.0) as client:

        async def ready() -> bool:
            try:
                return (await client.get(url)).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(
            ready,
            timeout=timeout,
            interval=0.1,
            message=f"{url} not ready after {timeout:.0f} s",
            error=KindError,
        )


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
    held: dict[str, list[str]] = {}  # butler -> the UIDs of its pods when it was killed
    cluster = userpath.Cluster(namespace=target.namespace, context=target.context)
    installed = False
    try:
        await ensure_cluster(target, reuse=kube_context is not None)
        gateway = k.pick_ipv4_gateway(await run(k.build_network_inspect()))
        # The session's servers on this machine (the LLM script, the Telegram stand-in,
        # Radicale) listen on every interface; pods call them at the host's address on
        # kind's network.
        env = {
            key: k.rewrite_host(v, gateway) if key in HOST_SERVER_URLS and v else v
            for key, v in (extra_env or {}).items()
        }
        if "BUTLERS_SPAN_DIR" in env:
            # A directory of this machine means nothing in a pod: each butler records its
            # spans in its own writable emptyDir instead (tracing on, as with a collector;
            # a whole session writes about a megabyte, far below the volume's limit).
            env["BUTLERS_SPAN_DIR"] = POD_SPAN_DIR
        script_url = env.get("BUTLERS_SCRIPT_URL")
        script_port = urlsplit(script_url).port if script_url else None
        # A butler a test runs on this machine and registers (a solo messenger the
        # switchboard answers through) listens there too, on a port fixed now so the
        # NetworkPolicies' extra egress rule can name it.
        solo_port = free_port()
        await load_images(target)
        installed = True
        # The user path every cluster backend shares: namespace, CRDs, env Secret, the
        # operator chart (with its own PostgreSQL here), the roster, Ready.
        resources = await userpath.install(
            cluster,
            values=k.build_chart_values(
                target,
                schema_prefix,
                secrets.token_urlsafe(18),
                (gateway, script_port) if script_port else None,
                [*k.extra_host_ports(env), solo_port],
            ),
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
                in_cluster_url=f"http://{name}.{target.namespace}.svc:{remotes[name]}/mcp",
            )

        async def kill(name: str) -> None:
            # A crash: the butler's process is stopped on its node, then its pod deleted
            # (SIGKILL after the unhandled SIGTERM), so it does nothing on its way down.
            # Down until `restart`: the node is cordoned first, so the Deployment's
            # replacement pod stays Pending; the Service then has no Ready endpoint.
            if not held:
                await run(k.build_cordon(target, schedulable=False))
            pods = await run(k.build_get_pods(target, name))
            held[name] = k.pod_uids(pods)
            for node, container in k.running_containers(pods, k.BUTLER_CONTAINER):
                inspect = await run(k.build_node_exec(node, "crictl", "inspect", container))
                await run(k.build_freeze(node, k.container_pid(inspect)))
            await run(k.build_kill_pod(target, name))
            await wait_no_ready_endpoint(target, name)

        async def restart(name: str) -> None:
            # A new pod; the port-forward followed the old one, so reopen it on the same port
            # once the new pod (not the terminating one) is Ready.
            if name in held:
                old = held.pop(name)
                if not held:
                    await run(k.build_cordon(target, schedulable=True))
            else:
                old = k.pod_uids(await run(k.build_get_pods(target, name)))
                await run(k.build_kill_pod(target, name))
            await wait_new_pod(target, name, old)
            await forwards.open(name, remotes[name])
            await wait_ready_http(f"http://127.0.0.1:{endpoints[name].port}/ready")

        # The tokens the operator made: the namespace's user token, each butler's own.
        user_token = (await read_secret(target, NAMESPACE_SECRET))[USER_TOKEN_KEY]
        butler_tokens = {n: (await read_secret(target, f"{n}-auth"))["token"] for n in names}
        # The chart's dashboard, port-forwarded like the butlers (the tests/e2e/dashboard
        # suite runs against it): its token, and its role's DSN through the same forward.
        dashboard_port = await forwards.open(k.DASHBOARD_SERVICE, k.DASHBOARD_PORT)
        await wait_ready_http(f"http://127.0.0.1:{dashboard_port}/api/health")
        dashboard_db = await read_secret(target, f"{k.DASHBOARD_SERVICE}-db")
        handle = EcosystemHandle(
            backend="kind",
            endpoints=endpoints,
            admin_dsn=admin,
            kill=kill,
            restart=restart,
            token=user_token,
            butler_tokens=butler_tokens,
            namespace=target.namespace,
            host_listener=(gateway, solo_port),
            dashboard_url=f"http://127.0.0.1:{dashboard_port}/",
            dashboard_token=(await read_secret(target, k.DASHBOARD_SERVICE))["token"],
            dashboard_dsn=k.rewrite_host(dashboard_db["dsn"], "127.0.0.1", pg_port),
            dashboard_schema=dashboard_db["schema"],
        )
        try:
            switchboards = [r.name for r in resources if is_switchboard(r)]
            if switchboards:
                advertised = {n: endpoints[n].registered_url for n in names}
                await wait_registered(handle, switchboards[0], advertised)
            yield handle
        finally:
            await handle.close()
    finally:
        if held:  # a test ended with a butler killed: the node schedules again
            await run(k.build_cordon(target, schedulable=True))
        await forwards.close_all()
        if installed and not keep_namespace:
            await userpath.teardown(cluster)
