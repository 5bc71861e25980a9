"""A real Kubernetes control plane for one test session, on this machine's loopback.

etcd, kube-apiserver (RBAC + Node authorization, service-account token signing,
the default admission plugins plus NodeRestriction and
OwnerReferencesPermissionEnforcement), kube-controller-manager (garbage
collector, namespace, deployment, replicaset, endpointslice, job and the
service-account controllers, node lifecycle) and kube-scheduler, each with its
own identity. No kubelet: `kubelet.ProcessKubelet` is the node. The API server calls
the kubelet (`pods/log`) at the node's InternalIP over mutual TLS: it verifies the
kubelet's serving certificate with the cluster's CA and presents its own client one.

The API server listens on port 443 of a loopback address of its own
(127.x.y.z): pods reach it as `https://kubernetes.default.svc` (what in-cluster
clients such as kopf hard-code), which each pod's /etc/hosts maps to that
address. Everything else listens on free loopback ports. Stopping kills every
process; the data lives in a temporary directory.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx
import yaml

from butlers.db.embedded import free_port

from .api import Credentials, KubeApi
from .binaries import locate
from .kubelet_logs import API_SERVER_CLIENT
from .pki import Authority, KeyPair, write_service_account_keys
from .processes import Supervisor

API_PORT = 443
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"
START_TIMEOUT = 60.0
ADMISSION_PLUGINS = ("NodeRestriction", "OwnerReferencesPermissionEnforcement")
CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "deployment-controller",
    "replicaset-controller",
    "endpointslice-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "node-lifecycle-controller",
    "pod-garbage-collector-controller",
    "resourcequota-controller",
)
# Who is who: client certificates (common name, organizations) per component.
IDENTITIES = {
    "admin": ("butlers-test-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "proxy": ("system:kube-proxy", ()),
}


# What pods do with the API (ServiceAccounts only), one JSON line per request: the tests
# compare what the operator actually does with what its Role grants.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}


def node_identity(node: str) -> tuple[str, tuple[str, ...]]:
    return f"system:node:{node}", ("system:nodes",)


class ControlPlaneError(RuntimeError):
    """A component did not start; the message has its log's tail."""


def pick_api_address() -> str:
    """A loopback address whose port 443 is free (each session has its own)."""
    for _ in range(50):
        address = (
            f"127.{random.randrange(1, 255)}.{random.randrange(0, 256)}.{random.randrange(1, 255)}"
        )
        with socket.socket() as sock:
            try:
                sock.bind((address, API_PORT))
            except OSError:
                continue
            return address
    raise ControlPlaneError(f"no loopback address with port {API_PORT} free")


def unavailable_reason() -> str | None:
    """None when a control plane can run here; otherwise one reason naming what is missing."""
    _, reason = locate()
    if reason:
        return reason
    if os.geteuid() != 0:
        return (
            "the apiserver backend needs root (the API server binds port 443 of its own "
            "loopback address and the process kubelet gives each pod a mount namespace)"
        )
    return None


def build_kubeconfig(server: str, ca: Path, pair: KeyPair, user: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "butlers-test",
                    "cluster": {"server": server, "certificate-authority": str(ca)},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate": str(pair.cert_path),
                        "client-key": str(pair.key_path),
                    },
                }
            ],
            "contexts": [
                {"name": "butlers-test", "context": {"cluster": "butlers-test", "user": user}}
            ],
            "current-context": "butlers-test",
        }
    )


@dataclass
class ControlPlane:
    """A running control plane: where it is and the credentials of each identity."""

    root: Path
    binaries: Path
    address: str
    supervisor: Supervisor
    pki: Path = field(init=False)
    authority: Authority | None = None
    pairs: dict[str, KeyPair] = field(default_factory=dict)
    kubeconfigs: dict[str, Path] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    sa_keys: tuple[Path, Path] | None = None

    def __post_init__(self) -> None:
        self.pki = self.root / "pki"
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def server(self) -> str:
        return f"https://{self.address}:{API_PORT}"

    @property
    def ca_path(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.kubeconfigs["admin"]

    def credentials(self, identity: str = "admin") -> Credentials:
        pair = self.pairs[identity]
        return Credentials(self.server, self.ca_path, pair.cert_path, pair.key_path)

    def api(self, identity: str = "admin") -> KubeApi:
        return KubeApi(self.credentials(identity), user_agent=f"butlers-test/{identity}")

    def issue_node_identity(self, node: str) -> Credentials:
        """Client credentials of a kubelet for `node` (system:node:<node>)."""
        assert self.authority is not None
        name, groups = node_identity(node)
        self.pairs[f"node-{node}"] = self.authority.issue(f"node-{node}", name, groups)
        return self.credentials(f"node-{node}")

    def issue_kubelet_serving(self, node: str, address: str) -> KeyPair:
        """The serving certificate of `node`'s kubelet, for the address the API server calls."""
        assert self.authority is not None
        return self.authority.issue(
            f"kubelet-{node}", node, dns_names=(node,), ip_addresses=(address,), server=True
        )

    # --- start-up ------------------------------------------------------------

    def write_pki(self) -> None:
        self.authority = Authority(self.pki)
        self.pairs["apiserver"] = self.authority.issue(
            "apiserver",
            "kube-apiserver",
            dns_names=(
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
                "localhost",
            ),
            ip_addresses=(self.address, "127.0.0.1", "10.96.0.1"),
            server=True,
        )
        # No API permissions: only the kubelet checks who it is.
        self.pairs["kubelet-client"] = self.authority.issue("kubelet-client", API_SERVER_CLIENT)
        for identity, (name, groups) in IDENTITIES.items():
            self.pairs[identity] = self.authority.issue(identity, name, groups)
            path = self.root / f"{identity}.kubeconfig"
            path.write_text(
                build_kubeconfig(self.server, self.ca_path, self.pairs[identity], identity)
            )
            path.chmod(0o600)
            self.kubeconfigs[identity] = path
        self.sa_keys = write_service_account_keys(self.pki)
        (self.root / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))

    def etcd_argv(self) -> list[str]:
        client, peer = (
            f"http://127.0.0.1:{self.ports['etcd']}",
            f"http://127.0.0.1:{self.ports['etcd-peer']}",
        )
        return [
            str(self.binaries / "etcd"),
            "--name=default",
            f"--data-dir={self.root / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def apiserver_argv(self) -> list[str]:
        assert self.sa_keys is not None
        pair = self.pairs["apiserver"]
        return [
            str(self.binaries / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            f"--bind-address={self.address}",
            f"--secure-port={API_PORT}",
            # Pods are this machine's processes: no routable address to advertise, and the
            # `kubernetes` Service's endpoints are not needed (pods use /etc/hosts).
            f"--advertise-address={self.address}",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.root / 'apiserver'}",
            f"--tls-cert-file={pair.cert_path}",
            f"--tls-private-key-file={pair.key_path}",
            f"--client-ca-file={self.ca_path}",
            "--authorization-mode=Node,RBAC",
            f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={self.sa_keys[1]}",
            f"--service-account-signing-key-file={self.sa_keys[0]}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # pods/log, exec…: to the node's InternalIP, both ends verified.
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-certificate-authority={self.ca_path}",
            f"--kubelet-client-certificate={self.pairs['kubelet-client'].cert_path}",
            f"--kubelet-client-key={self.pairs['kubelet-client'].key_path}",
            f"--audit-policy-file={self.root / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--allow-privileged=false",
            "--profiling=false",
            "--v=1",
        ]

    def controller_manager_argv(self) -> list[str]:
        assert self.sa_keys is not None
        config = self.kubeconfigs["controller-manager"]
        return [
            str(self.binaries / "kube-controller-manager"),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['controller-manager']}",
            f"--cert-dir={self.root / 'controller-manager'}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.sa_keys[0]}",
            f"--root-ca-file={self.ca_path}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # The node controller lifts a new node's not-ready taint at its next pass.
            "--node-monitor-period=1s",
            "--profiling=false",
            "--v=1",
        ]

    def scheduler_argv(self) -> list[str]:
        config = self.kubeconfigs["scheduler"]
        return [
            str(self.binaries / "kube-scheduler"),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['scheduler']}",
            f"--cert-dir={self.root / 'scheduler'}",
            "--leader-elect=false",
            "--profiling=false",
            "--v=1",
        ]

    async def _wait_http(self, name: str, url: str, verify: object) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        async with httpx.AsyncClient(verify=verify, timeout=2.0) as client:  # type: ignore[arg-type]
            while True:
                self.supervisor.check_running()
                try:
                    response = await client.get(url)
                    if response.status_code == 200:
                        return
                    detail = response.text[-300:]
                except httpx.HTTPError as exc:
                    detail = str(exc)
                if time.monotonic() > deadline:
                    raise ControlPlaneError(
                        f"{name} not healthy after {START_TIMEOUT:.0f} s ({url}: {detail}); "
                        f"see {self.supervisor.log_path(name)}"
                    )
                await asyncio.sleep(0.1)

    async def start(self) -> None:
        self.write_pki()
        for name in ("etcd", "etcd-peer", "controller-manager", "scheduler"):
            self.ports[name] = free_port()
        self.supervisor.start("etcd", self.etcd_argv())
        await self._wait_http("etcd", f"http://127.0.0.1:{self.ports['etcd']}/health", False)
        self.supervisor.start("kube-apiserver", self.apiserver_argv())
        verify = ssl.create_default_context(cafile=str(self.ca_path))
        await self._wait_http("kube-apiserver", f"{self.server}/readyz", verify)
        # Only now: before the API server's bootstrap RBAC exists they would be refused.
        self.supervisor.start("kube-controller-manager", self.controller_manager_argv())
        self.supervisor.start("kube-scheduler", self.scheduler_argv())
        await asyncio.gather(
            self._wait_http(
                "kube-controller-manager",
                f"https://127.0.0.1:{self.ports['controller-manager']}/healthz",
                False,
            ),
            self._wait_http(
                "kube-scheduler", f"https://127.0.0.1:{self.ports['scheduler']}/healthz", False
            ),
        )

    def stop(self) -> None:
        self.supervisor.stop_all(
            order=("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
        )


@asynccontextmanager
async def running_control_plane(
    root: Path, binaries: Path | None = None
) -> AsyncIterator[ControlPlane]:
    """A fresh control plane under `root`; every process is killed on exit."""
    if binaries is None:
        binaries, reason = locate()
        if binaries is None:
            raise ControlPlaneError(reason or "no control plane binaries")
    plane = ControlPlane(
        root=root,
        binaries=binaries,
        address=pick_api_address(),
        supervisor=Supervisor(root / "logs"),
    )
    try:
        await plane.start()
        yield plane
    finally:
        await asyncio.to_thread(plane.stop)
