"""The process kubelet: a Node whose pods run as local processes.

It registers its Node (Ready, with a declared capacity), renews the node's
Lease, watches the pods the scheduler binds to it and runs each with a
`PodWorker`. It authenticates as `system:node:<name>`, so the Node authorizer
and NodeRestriction decide what it may read and write, as for a real kubelet.
Pods share this machine's network: each container port is remapped to a free
local port, and the service proxy (`proxy.ServiceProxy`) stands in for cluster
DNS and Service routing. With a serving certificate it also serves the API server's
`pods/log` calls (`kubelet_logs.KubeletServer`) on its node address.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import itertools
import logging
import platform
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

from .api import ApiError, KubeApi, build_path
from .images import Images
from .kubelet_logs import KubeletServer, server_context
from .podworker import PodWorker
from .proxy import ServiceProxy

log = logging.getLogger("butlers.tests.kubelet")
LEASE_SECONDS = 40
RENEW_SECONDS = 10.0
POD_CIDR = "10.244.0.0/16"
KUBELET_VERSION = "v1.37.2"


@dataclass(frozen=True)
class Capacity:
    """What the node declares it has (the scheduler fits pods' requests into it)."""

    cpu: str = "32"
    memory: str = "64Gi"
    pods: str = "250"
    ephemeral_storage: str = "100Gi"

    def as_resources(self) -> dict[str, str]:
        return {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral-storage": self.ephemeral_storage,
        }


def detect_host_ip() -> str:
    """This machine's primary IPv4 address (the route to the outside), else TEST-NET-1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))  # no packet is sent
            address = sock.getsockname()[0]
        except OSError:
            return "192.0.2.1"
    return address if not ipaddress.ip_address(address).is_loopback else "192.0.2.1"


def micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
    }


def build_node_status(
    name: str, host_ip: str, capacity: Capacity, kubelet_port: int = 10250
) -> dict[str, Any]:
    now = micro_time()[:19] + "Z"

    def condition(kind: str, ok: bool, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": "True" if ok else "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "capacity": capacity.as_resources(),
        "allocatable": capacity.as_resources(),
        "conditions": [
            condition(
                "MemoryPressure",
                False,
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            condition(
                "DiskPressure", False, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
            ),
            condition(
                "PIDPressure",
                False,
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            condition("Ready", True, "KubeletReady", "process kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": host_ip},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": platform.release(),
            "osImage": "process kubelet (butlers tests)",
            "containerRuntimeVersion": "process://1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


class ProcessKubelet:
    """One node; `run()` serves until cancelled, `shutdown()` stops every pod."""

    def __init__(
        self,
        *,
        api: KubeApi,
        node_name: str,
        root: Path,
        api_address: str,
        proxy: ServiceProxy,
        images: Images | None = None,
        capacity: Capacity | None = None,
        writable_paths: Sequence[str] = (),
        restart_backoff: float = 10.0,
        serving: tuple[Path, Path, Path] | None = None,
        host_ip: str | None = None,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.root = root
        self.api_address = api_address
        self.proxy = proxy
        self.images = images or Images()
        self.capacity = capacity or Capacity()
        self.writable_paths = list(writable_paths)
        self.restart_backoff = restart_backoff
        self.host_ip = host_ip or detect_host_ip()
        self.serving = serving  # (certificate, key, the CA of the API server's client cert)
        self.server: KubeletServer | None = None
        self.workers: dict[str, PodWorker] = {}
        self._ips: dict[str, str] = {}
        self._next_ip = itertools.count(2)
        self._background: set[asyncio.Task[Any]] = set()
        self.registered = asyncio.Event()
        (root / "logs").mkdir(parents=True, exist_ok=True)

    # --- what pod workers ask of the node -------------------------------------------

    def allocate_ip(self, uid: str) -> str:
        if uid not in self._ips:
            network = ipaddress.ip_network(POD_CIDR)
            self._ips[uid] = str(network[next(self._next_ip)])
        return self._ips[uid]

    def log_path(self, pod: Mapping[str, Any], container: str) -> Path:
        meta = pod["metadata"]
        return self.root / "logs" / f"{meta['namespace']}_{meta['name']}_{container}.log"

    def container_log(self, namespace: str, pod: str, container: str) -> Path | str:
        """The log file of a container of a pod on this node, or why there is none."""
        try:
            worker = self.worker(namespace, pod)
        except LookupError as exc:
            return str(exc)
        if container not in {c["name"] for c in worker.pod["spec"].get("containers") or []} | {
            c["name"] for c in worker.pod["spec"].get("initContainers") or []
        }:
            return f"container {container} is not valid for pod {pod}"
        return self.log_path(worker.pod, container)

    def api_env(self) -> dict[str, str]:
        host, port = self.api_address, "443"
        return {
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "KUBERNETES_PORT": f"tcp://{host}:{port}",
            "KUBERNETES_PORT_443_TCP": f"tcp://{host}:{port}",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_PORT_443_TCP_PORT": port,
            "KUBERNETES_PORT_443_TCP_ADDR": host,
        }

    def lookup_service(self, namespace: str, host: str, port: int) -> str | None:
        return self.proxy.lookup(namespace, host, port)

    async def service_env(self, namespace: str) -> dict[str, str]:
        return self.proxy.service_env(namespace)

    def local_port(self, uid: str, container_port: int) -> int | None:
        worker = self.workers.get(uid)
        return worker.local_port(container_port) if worker else None

    def ready_endpoint_port(self, uid: str, container_port: int) -> int | None:
        return self.local_port(uid, container_port)

    async def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": "kubelet", "host": self.node_name},
            "firstTimestamp": micro_time()[:19] + "Z",
            "lastTimestamp": micro_time()[:19] + "Z",
            "count": 1,
            "reportingComponent": "kubelet",
            "reportingInstance": self.node_name,
        }
        try:
            await self.api.create(build_path("v1", "events", meta["namespace"]), body)
        except ApiError as exc:
            log.debug("event %s for %s not recorded: %s", reason, meta["name"], exc)

    def worker(self, namespace: str, pod: str) -> PodWorker:
        for worker in self.workers.values():
            if (worker.namespace, worker.name) == (namespace, pod):
                return worker
        raise LookupError(f"pod {namespace}/{pod} does not run on {self.node_name}")

    async def crash(self, namespace: str, pod: str, container: str, hold: bool = True) -> None:
        """Kill a container as a crash would; `hold` keeps it down until `release`."""
        await self.worker(namespace, pod).crash(container, hold)

    async def release(self, namespace: str, pod: str, container: str) -> None:
        self.worker(namespace, pod).release(container)

    # --- node ------------------------------------------------------------------------

    async def serve_logs(self) -> int:
        """Start the HTTPS endpoint on the node's address; its port (10250 when there is
        no serving certificate, or the address cannot be bound: then no logs)."""
        if self.serving is None:
            return 10250
        cert, key, client_ca = self.serving
        self.server = KubeletServer(
            self.container_log, server_context(cert, key, client_ca), self.host_ip
        )
        try:
            return await self.server.start()
        except OSError as exc:
            log.warning("kubelet: no container logs, %s cannot be bound: %s", self.host_ip, exc)
            self.server = None
            return 10250

    async def register(self) -> None:
        port = await self.serve_logs()
        try:
            await self.api.create("/api/v1/nodes", build_node(self.node_name))
        except ApiError as exc:
            if exc.status != 409:
                raise
        status = build_node_status(self.node_name, self.host_ip, self.capacity, port)
        await self.api.patch(
            build_path("v1", "nodes", None, self.node_name, "status"), {"status": status}
        )
        self.registered.set()

    async def _lease_loop(self) -> None:
        path = build_path("coordination.k8s.io/v1", "leases", "kube-node-lease", self.node_name)
        while True:
            spec = {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": micro_time(),
            }
            try:
                if await self.api.find(path) is None:
                    await self.api.create(
                        build_path("coordination.k8s.io/v1", "leases", "kube-node-lease"),
                        {
                            "apiVersion": "coordination.k8s.io/v1",
                            "kind": "Lease",
                            "metadata": {"name": self.node_name, "namespace": "kube-node-lease"},
                            "spec": spec,
                        },
                    )
                else:
                    await self.api.patch(path, {"spec": spec})
            except (ApiError, OSError) as exc:
                log.warning("node lease renewal failed: %s", exc)
            await asyncio.sleep(RENEW_SECONDS)

    # --- pods ------------------------------------------------------------------------

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def handle(self, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if kind == "DELETED":
            if worker is not None:
                self._spawn(self._forget(worker, grace=0.0))
            return
        deleting = pod["metadata"].get("deletionTimestamp") is not None
        if worker is None:
            if deleting:
                self._spawn(self._delete_unstarted(pod))
                return
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            worker = self.workers[uid] = PodWorker(self, pod)
            worker.start()
            return
        worker.update(pod)
        if deleting and not worker.terminating.is_set():
            self._spawn(self._forget(worker, grace=None, delete=True))

    async def _forget(self, worker: PodWorker, grace: float | None, delete: bool = False) -> None:
        await worker.terminate(grace, delete=delete)
        self.workers.pop(worker.uid, None)

    async def _delete_unstarted(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.api.delete(
                build_path("v1", "pods", meta["namespace"], meta["name"]),
                {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
            )

    async def _pod_loop(self) -> None:
        selector = f"spec.nodeName={self.node_name}"
        while True:
            listing = await self.api.get("/api/v1/pods", fieldSelector=selector)
            version = listing["metadata"]["resourceVersion"]
            seen = set()
            for pod in listing.get("items") or []:
                seen.add(pod["metadata"]["uid"])
                self.handle("MODIFIED", pod)
            for uid in set(self.workers) - seen:
                self._spawn(self._forget(self.workers[uid], grace=0.0))
            try:
                while True:
                    async for kind, obj in self.api.watch(
                        "/api/v1/pods", version, fieldSelector=selector
                    ):
                        version = obj["metadata"].get("resourceVersion", version)
                        if kind != "BOOKMARK":
                            self.handle(kind, obj)
            except ApiError as exc:
                if exc.status != 410:
                    log.warning("pod watch failed: %s", exc)
                    await asyncio.sleep(1.0)
            except (OSError, httpx.TransportError) as exc:
                # The connection broke (API server restarting, timeout): list and watch again.
                log.warning("pod watch broke: %s", exc)
                await asyncio.sleep(0.5)

    async def run(self) -> None:
        await self.register()
        await asyncio.gather(self._lease_loop(), self._pod_loop())

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop every pod's processes (the cluster is going away: pod objects stay)."""
        workers = list(self.workers.values())
        await asyncio.gather(
            *(w.terminate(grace, delete=False) for w in workers), return_exceptions=True
        )
        self.workers.clear()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.server is not None:
            await self.server.stop()
