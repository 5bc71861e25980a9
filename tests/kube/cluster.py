"""A whole test cluster: the control plane plus one process-kubelet node.

The kubelet and the service proxy run in a thread of their own, with their own
event loop, so a test that blocks its loop (a synchronous helm call, a long
assertion) never stalls a probe or a pod's status. `running_cluster` yields
once the node is Ready and schedulable; on exit every pod process and every
control-plane process is killed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .api import KubeApi, build_path
from .controlplane import ControlPlane, running_control_plane
from .kubelet import Capacity, ProcessKubelet, detect_host_ip
from .proxy import ServiceProxy

NODE = "process-node"
# The kubelet's directory (pods, volumes, logs) must lie outside every path a pod mounts a
# volume on; pods commonly mount an emptyDir at /tmp, so not there.
KUBELET_BASE = Path("/var/tmp")
READY_TIMEOUT = 60.0
T = TypeVar("T")


class NodeThread:
    """The kubelet and the service proxy, served from their own thread and loop."""

    def __init__(
        self,
        plane: ControlPlane,
        root: Path,
        writable_paths: Sequence[str] = (),
        restart_backoff: float = 10.0,
        capacity: Capacity | None = None,
    ) -> None:
        self.plane = plane
        self.root = root
        self.node_credentials = plane.issue_node_identity(NODE)
        self.host_ip = detect_host_ip()
        self.serving = plane.issue_kubelet_serving(NODE, self.host_ip)
        self.proxy_credentials = plane.credentials("proxy")
        self.writable_paths = writable_paths
        self.restart_backoff = restart_backoff
        self.capacity = capacity
        self.loop = asyncio.new_event_loop()
        self.kubelet: ProcessKubelet | None = None
        self.proxy: ServiceProxy | None = None
        self._thread = threading.Thread(target=self._serve, name="process-kubelet", daemon=True)
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._main: asyncio.Task[None] | None = None

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main_task())
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _main_task(self) -> None:
        self._main = asyncio.current_task()
        node_api = KubeApi(self.node_credentials, user_agent="process-kubelet")
        proxy_api = KubeApi(self.proxy_credentials, user_agent="process-proxy")
        self.proxy = ServiceProxy(proxy_api)
        self.kubelet = ProcessKubelet(
            api=node_api,
            node_name=NODE,
            root=self.root,
            api_address=self.plane.address,
            proxy=self.proxy,
            writable_paths=self.writable_paths,
            restart_backoff=self.restart_backoff,
            capacity=self.capacity,
            serving=(self.serving.cert_path, self.serving.key_path, self.plane.ca_path),
            host_ip=self.host_ip,
        )
        self.proxy.port_of = self.kubelet.local_port
        proxy_task = asyncio.create_task(self.proxy.run())
        kubelet_task = asyncio.create_task(self.kubelet.run())
        try:
            await asyncio.wait_for(
                asyncio.gather(self.kubelet.registered.wait(), self.proxy.synced.wait()),
                READY_TIMEOUT,
            )
            self._ready.set_result(None)
            await asyncio.gather(proxy_task, kubelet_task)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise
        finally:
            await self.kubelet.shutdown()
            await self.proxy.shutdown()
            for task in (proxy_task, kubelet_task):
                task.cancel()
            await asyncio.gather(proxy_task, kubelet_task, return_exceptions=True)
            await node_api.close()
            await proxy_api.close()

    def start(self) -> None:
        self._thread.start()
        self._ready.result(READY_TIMEOUT + 5)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run `coroutine` on the node's loop (from any other thread); its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def async_call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await `coroutine` run on the node's loop, from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def stop(self) -> None:
        if self._main is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(self._main.cancel)
        self._thread.join(60)


@dataclass
class KubeCluster:
    plane: ControlPlane
    node: NodeThread

    @property
    def kubeconfig(self) -> Path:
        return self.plane.admin_kubeconfig

    @property
    def kubelet(self) -> ProcessKubelet:
        assert self.node.kubelet is not None
        return self.node.kubelet

    @property
    def proxy(self) -> ServiceProxy:
        assert self.node.proxy is not None
        return self.node.proxy

    def api(self, identity: str = "admin") -> KubeApi:
        """A client for the caller's event loop (close it)."""
        return self.plane.api(identity)

    def service_address(self, namespace: str, service: str, port: int | None = None) -> str:
        """`127.0.0.1:<port>` where this machine reaches the Service (stable while it exists)."""
        return self.proxy.address(namespace, service, port)

    async def wait_service(
        self, namespace: str, service: str, port_name: str = "", timeout: float = 60.0
    ) -> str:
        """Until the proxy routes the Service port to a Ready endpoint; its local address."""
        from .wait import wait_until

        await wait_until(
            lambda: self.proxy.endpoints(namespace, service, port_name),
            f"a Ready endpoint of Service {namespace}/{service}",
            timeout,
        )
        return self.service_address(namespace, service)

    def log_dir(self) -> Path:
        return self.kubelet.root / "logs"


@contextmanager
def kubelet_scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory for a cluster, under KUBELET_BASE; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=KUBELET_BASE))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def wait_node_schedulable(api: KubeApi, node: str, timeout: float = READY_TIMEOUT) -> None:
    """Until the node is Ready and the node controller lifted its not-ready taint."""
    deadline = time.monotonic() + timeout
    while True:
        obj = await api.find(build_path("v1", "nodes", None, node))
        taints = ((obj or {}).get("spec") or {}).get("taints") or []
        conditions = {
            c["type"]: c["status"]
            for c in ((obj or {}).get("status") or {}).get("conditions") or []
        }
        if obj and conditions.get("Ready") == "True" and not taints:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"node {node} not schedulable after {timeout:.0f} s: taints {taints}"
            )
        await asyncio.sleep(0.1)


@asynccontextmanager
async def running_cluster(
    root: Path,
    writable_paths: Sequence[str] = (),
    restart_backoff: float = 10.0,
    capacity: Capacity | None = None,
) -> AsyncIterator[KubeCluster]:
    async with running_control_plane(root / "control-plane") as plane:
        node = NodeThread(plane, root / "node", writable_paths, restart_backoff, capacity)
        await asyncio.to_thread(node.start)
        try:
            async with plane.api() as api:
                await wait_node_schedulable(api, NODE)
            yield KubeCluster(plane, node)
        finally:
            await asyncio.to_thread(node.stop)
