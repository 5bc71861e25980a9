"""The service proxy: Services on this machine, routed to their Ready endpoints.

kube-proxy's job, in user space. For every TCP port of every Service it holds a
listener on a free loopback port for as long as the Service exists, and sends
each connection to a Ready endpoint of the Service, read from the
EndpointSlices the real endpointslice controller writes (and through the
kubelet's port map, to where that pod's container listens). With no Ready
endpoint a connection is closed at once. It also answers for cluster DNS:
`lookup` turns `name[.namespace[.svc[.cluster.local]]]:port` or `clusterIP:port`
into the listener's address. It authenticates as `system:kube-proxy`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx

from butlers.db.embedded import free_port

from .api import ApiError, KubeApi, build_path

log = logging.getLogger("butlers.tests.proxy")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
CLUSTER_SUFFIXES = ("svc.cluster.local", "svc")
PortOf = Callable[[str, int], int | None]  # (pod uid, container port) → local port
COPY_CHUNK = 65536


@dataclass
class Listener:
    namespace: str
    service: str
    port: int  # the Service port
    port_name: str
    local: int
    server: asyncio.Server | None = None
    turn: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.local}"


def split_service_host(host: str, namespace: str) -> tuple[str, str] | None:
    """(namespace, name) for a cluster DNS name of a Service, else None."""
    parts = host.split(".")
    if len(parts) == 1:
        return namespace, parts[0]
    rest = ".".join(parts[2:])
    if len(parts) == 2 or rest in CLUSTER_SUFFIXES:
        return parts[1], parts[0]
    return None


def ready_targets(slices: Sequence[Mapping[str, Any]], port_name: str) -> list[tuple[str, int]]:
    """(pod uid, container port) of every Ready endpoint for the Service port `port_name`."""
    targets = []
    for endpoint_slice in slices:
        ports = [p for p in endpoint_slice.get("ports") or [] if (p.get("name") or "") == port_name]
        if not ports:
            continue
        number = ports[0].get("port")
        for endpoint in endpoint_slice.get("endpoints") or []:
            ref = endpoint.get("targetRef") or {}
            ready = (endpoint.get("conditions") or {}).get("ready")
            if ready and ref.get("kind") == "Pod" and number is not None:
                targets.append((ref["uid"], int(number)))
    return sorted(targets)


class ServiceProxy:
    """Watches Services and EndpointSlices; owns one listener per Service port."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.port_of: PortOf = lambda uid, port: None
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self.listeners: dict[tuple[str, str, int], Listener] = {}
        self.slices: dict[str, dict[str, Any]] = {}  # by uid
        self.synced = asyncio.Event()
        self._lock = asyncio.Lock()

    # --- lookups ---------------------------------------------------------------------

    def lookup(self, namespace: str, host: str, port: int) -> str | None:
        for (ns, name), service in self.services.items():
            if service["spec"].get("clusterIP") == host:
                listener = self.listeners.get((ns, name, port))
                return listener.address if listener else None
        key = split_service_host(host, namespace)
        if key is None:
            return None
        listener = self.listeners.get((*key, port))
        return listener.address if listener else None

    def address(self, namespace: str, service: str, port: int | None = None) -> str:
        """The local address of a Service port (its only port when `port` is None)."""
        matches = [
            listener
            for (ns, name, p), listener in self.listeners.items()
            if (ns, name) == (namespace, service) and port in (None, p)
        ]
        if not matches:
            raise LookupError(
                f"Service {namespace}/{service} port {port} is not known to the proxy"
            )
        return matches[0].address

    def service_env(self, namespace: str) -> dict[str, str]:
        from .environment import build_service_env

        services = [s for (ns, _), s in sorted(self.services.items()) if ns == namespace]

        def local(service: Mapping[str, Any], port: int) -> str | None:
            listener = self.listeners.get((namespace, service["metadata"]["name"], port))
            return listener.address if listener else None

        return build_service_env(services, local)

    def endpoints(self, namespace: str, service: str, port_name: str) -> list[int]:
        """Local ports of the Service port's Ready endpoints (pods this kubelet runs)."""
        slices = [
            s
            for s in self.slices.values()
            if s["metadata"]["namespace"] == namespace
            and (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == service
        ]
        ports = [self.port_of(uid, number) for uid, number in ready_targets(slices, port_name)]
        return [p for p in ports if p is not None]

    # --- listeners -------------------------------------------------------------------

    async def _forward(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        ports = self.endpoints(listener.namespace, listener.service, listener.port_name)
        if not ports:
            writer.close()
            return
        port = ports[next(listener.turn) % len(ports)]
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while chunk := await src.read(COPY_CHUNK):
                    dst.write(chunk)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    if dst.can_write_eof():
                        dst.write_eof()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                w.close()

    async def _open(self, namespace: str, name: str, port: Mapping[str, Any]) -> None:
        key = (namespace, name, int(port["port"]))
        if key in self.listeners or port.get("protocol", "TCP") != "TCP":
            return
        listener = Listener(namespace, name, int(port["port"]), port.get("name") or "", free_port())
        listener.server = await asyncio.start_server(
            functools.partial(self._forward, listener), "127.0.0.1", listener.local
        )
        self.listeners[key] = listener

    async def _close(self, key: tuple[str, str, int]) -> None:
        listener = self.listeners.pop(key, None)
        if listener is not None and listener.server is not None:
            listener.server.close()

    async def apply_service(self, kind: str, service: Mapping[str, Any]) -> None:
        meta = service["metadata"]
        key = (meta["namespace"], meta["name"])
        async with self._lock:
            wanted = set()
            if kind != "DELETED":
                self.services[key] = dict(service)
                for port in service["spec"].get("ports") or []:
                    wanted.add((*key, int(port["port"])))
                    await self._open(*key, port)
            else:
                self.services.pop(key, None)
            for listener_key in [k for k in self.listeners if k[:2] == key and k not in wanted]:
                await self._close(listener_key)

    def apply_slice(self, kind: str, endpoint_slice: Mapping[str, Any]) -> None:
        uid = endpoint_slice["metadata"]["uid"]
        if kind == "DELETED":
            self.slices.pop(uid, None)
        else:
            self.slices[uid] = dict(endpoint_slice)

    async def sync_namespace(self, namespace: str) -> None:
        """Read the namespace's Services now (a pod about to start may name a new one)."""
        for service in await self.api.list(build_path("v1", "services", namespace)):
            if (namespace, service["metadata"]["name"]) not in self.services:
                await self.apply_service("ADDED", service)

    # --- watching --------------------------------------------------------------------

    async def _watch(self, path: str, apply: Callable[[str, dict[str, Any]], Any]) -> None:
        while True:
            listing = await self.api.get(path)
            version = listing["metadata"]["resourceVersion"]
            if path.endswith("/endpointslices"):
                self.slices.clear()  # a fresh listing: forget what may have gone meanwhile
            for item in listing.get("items") or []:
                result = apply("ADDED", item)
                if asyncio.iscoroutine(result):
                    await result
            if path.endswith("/services"):
                self.synced.set()
            try:
                while True:
                    async for kind, obj in self.api.watch(path, version):
                        version = obj["metadata"].get("resourceVersion", version)
                        if kind == "BOOKMARK":
                            continue
                        result = apply(kind, obj)
                        if asyncio.iscoroutine(result):
                            await result
            except ApiError as exc:
                if exc.status != 410:
                    log.warning("watch %s failed: %s", path, exc)
                    await asyncio.sleep(1.0)
            except (OSError, httpx.TransportError) as exc:
                log.warning("watch %s broke: %s", path, exc)
                await asyncio.sleep(0.5)

    async def run(self) -> None:
        await asyncio.gather(
            self._watch("/api/v1/services", self.apply_service),
            self._watch("/apis/discovery.k8s.io/v1/endpointslices", self.apply_slice),
        )

    async def shutdown(self) -> None:
        for key in list(self.listeners):
            await self._close(key)
