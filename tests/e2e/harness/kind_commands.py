"""The `kind` backend's commands and checks, as pure functions (unit-tested apart).

Each `build_*` returns an argv; nothing here runs a process except
`kind_unavailable_reason`, which asks `docker info` whether an engine answers.
"""

from __future__ import annotations

import ipaddress
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import userpath
from .dashboard_chart import DISCOVERY_INTERVAL

CLUSTER = "butlers"  # kind-config.yaml's `name`
REGISTRY = "ghcr.io/butlers-dev"
TAG = "0.1.0"
RELEASE = "butlers"
DASHBOARD_SERVICE = f"{RELEASE}-dashboard"  # the chart's dashboard Service, and its Secrets
DASHBOARD_PORT = 80  # that Service's port (the chart's default)
ENV_SECRET = userpath.ENV_SECRET
BUTLER_CONTAINER = "butler"  # the butler pod's container (operator/render.py)
POSTGRES_SERVICE = f"{RELEASE}-postgres"
POSTGRES_ADMIN_SECRET = f"{RELEASE}-postgres-admin"
# The chart's development PostgreSQL (values.yaml `postgres.image`): loaded like ours.
POSTGRES_IMAGE = "docker.io/library/postgres:17.2-alpine"
CRD = "butlers.butlers.dev"
# Set by the kind lane (tests/kind/lane.py): the Docker engine its cluster runs on, and
# the PostgreSQL image its node image carries (nothing to pull or load then).
DOCKER_HOST_ENV = "BUTLERS_KIND_DOCKER_HOST"
NODE_POSTGRES_ENV = "BUTLERS_KIND_POSTGRES_IMAGE"


def node_postgres_image() -> str | None:
    return os.environ.get(NODE_POSTGRES_ENV) or None


# Teardown never waits longer than this for Butlers, then for the namespace.
TEARDOWN_SECONDS = 120


class KindCommandError(ValueError):
    """A kind setting or command output this backend cannot work with."""


@dataclass(frozen=True)
class KindTarget:
    """Where and what a session installs."""

    namespace: str
    context: str = f"kind-{CLUSTER}"
    cluster: str = CLUSTER
    registry: str = REGISTRY
    tag: str = TAG

    @classmethod
    def for_context(cls, namespace: str, context: str | None) -> KindTarget:
        """The target for `--kube-context` (or the cluster of kind-config.yaml).

        Images are loaded with `kind load --name <cluster>`, so the context must be a kind
        cluster's (`kind-<cluster>`): kubectl, helm and kind then address the same cluster.
        """
        if context is None:
            return cls(namespace=namespace)
        if not context.startswith("kind-") or context == "kind-":
            raise KindCommandError(
                f"--kube-context {context!r} is not a kind cluster's context (kind-<name>): "
                "the kind backend loads its images with `kind load`"
            )
        return cls(namespace=namespace, context=context, cluster=context.removeprefix("kind-"))

    @property
    def butler_image(self) -> str:
        return f"{self.registry}/butler:{self.tag}"

    @property
    def operator_image(self) -> str:
        return f"{self.registry}/operator:{self.tag}"


def kind_unavailable_reason(
    which: Callable[[str], str | None] = shutil.which,
    engine_answers: Callable[[], bool] | None = None,
) -> str | None:
    """None when the kind backend can run here; otherwise ONE reason naming what is missing."""
    prefix = "kind backend needs a running Docker engine, the kind binary and kubectl"
    for binary in ("docker", "kind", "kubectl"):
        if which(binary) is None:
            return f"{prefix}: {binary} not found"
    answers = engine_answers or _docker_engine_answers
    if not answers():
        return f"{prefix}: the Docker engine does not answer (`docker info` failed)"
    return None


def _docker_engine_answers() -> bool:
    try:
        result = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


def build_namespace(token: str) -> str:
    return f"butlers-e2e-{token}"


def build_list_clusters() -> list[str]:
    return ["kind", "get", "clusters"]


def build_create_cluster(config: Path, cluster: str = CLUSTER) -> list[str]:
    return [
        "kind",
        "create",
        "cluster",
        "--name",
        cluster,
        "--config",
        str(config),
        "--wait",
        "120s",
    ]


def build_image_builds(root: Path, target: KindTarget) -> list[list[str]]:
    """`make images` spelled out: `python -m images.build` (legacy builder, so no
    provenance attestation `kind load` could not import), run from the repository root."""
    return [
        [
            sys.executable, "-m", "images.build",
            "--registry", target.registry, "--tag", target.tag,
            "butler", "operator",
        ]
    ]  # fmt: skip


def node_platform(machine: str | None = None) -> str:
    """The platform of kind's nodes: this machine's (nodes are containers on it)."""
    arch = (machine or platform.machine()).lower()
    return "linux/" + {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm/v7"}.get(arch, arch)


# `docker save --platform` needs an engine with API 1.48 (Docker 28); older engines have no
# containerd image store, whose multi-arch images are why it is given.
SAVE_PLATFORM_API = (1, 48)


def save_takes_platform(api_version: str) -> bool:
    """Whether an engine of this API version (`docker version`'s Server.APIVersion) accepts
    `docker save --platform`."""
    try:
        major, minor = (int(part) for part in api_version.strip().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= SAVE_PLATFORM_API


def build_engine_api_version() -> list[str]:
    return ["docker", "version", "--format", "{{.Server.APIVersion}}"]


def build_kind_load(
    target: KindTarget,
    archive: Path,
    node_platform_: str | None = None,
    with_platform: bool = True,
) -> list[list[str]]:
    """Our two images and the chart's PostgreSQL (unless the node has its own; nodes pull
    nothing themselves), saved for the nodes' platform only, then loaded from that archive.

    `kind load docker-image` saves every platform of a multi-arch image, which fails
    under Docker's containerd image store (the default of new installs) when only one
    platform's layers were pulled; `docker save --platform` writes just the one needed
    (`with_platform=False` for engines too old to take it, which have no such store).
    """
    postgres = [] if node_postgres_image() else [POSTGRES_IMAGE]
    images = [target.butler_image, target.operator_image, *postgres]
    platform_args = ["--platform", node_platform_ or node_platform()] if with_platform else []
    return [
        ["docker", "save", *platform_args, "--output", str(archive), *images],
        ["kind", "load", "image-archive", "--name", target.cluster, str(archive)],
    ]  # fmt: skip


def build_image_present(image: str) -> list[str]:
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def build_pull(image: str) -> list[str]:
    return ["docker", "pull", image]


# The session's servers on this machine, besides the model's, that pods call (by the
# variable holding each one's URL): the Telegram stand-in, Radicale.
EXTRA_HOST_URLS = ("TELEGRAM_API_BASE", "CALDAV_URL")


def extra_host_ports(env: Mapping[str, str]) -> list[int]:
    """The ports of `EXTRA_HOST_URLS` set in `env`: `build_chart_values`'s `host_ports`."""
    ports = [urlsplit(env[key]).port for key in EXTRA_HOST_URLS if env.get(key)]
    return [port for port in ports if port]


def build_chart_values(
    target: KindTarget,
    schema_prefix: str,
    postgres_password: str,
    script_server: tuple[str, int] | None = None,
    host_ports: Sequence[int] = (),
) -> dict[str, Any]:
    """The operator chart for one session: its own PostgreSQL, the e2e env Secret, our images.

    The password is given (not generated by the chart) so the chart also renders without
    a helm binary, as `helm template` would. The butlers' "model" is the session's script
    server on this machine (`script_server`: its address from the cluster, and port): the
    NetworkPolicy egress to the model API points there. `host_ports` are other test
    servers on this machine the pods call at that address (the Telegram stand-in,
    Radicale): one
    extra egress rule allows exactly those.
    """
    values: dict[str, Any] = {
        "image": {"repository": f"{target.registry}/operator", "tag": target.tag},
        "butlerImage": {"repository": f"{target.registry}/butler", "tag": target.tag},
        "butlerEnvSecret": ENV_SECRET,
        "postgres": {
            "enabled": True,
            "password": postgres_password,
            **({"image": node_postgres_image()} if node_postgres_image() else {}),
        },
        # Given for the same reason as the password (a generated one needs `lookup`); it
        # finds new Butlers quickly, as the other cluster backend's does.
        "dashboard": {
            "token": secrets.token_urlsafe(24),
            "env": [{"name": "BUTLERS_DASHBOARD_DISCOVERY_INTERVAL", "value": DISCOVERY_INTERVAL}],
        },
        "database": {"schemaPrefix": schema_prefix},
        "resyncSeconds": 5,
    }
    if script_server is not None:
        host, port = script_server
        policy: dict[str, Any] = {"model": {"cidrs": [host_cidr(host)], "ports": [port]}}
        if host_ports:
            policy["extraEgress"] = [
                {
                    "to": [{"ipBlock": {"cidr": host_cidr(host)}}],
                    "ports": [{"protocol": "TCP", "port": p} for p in host_ports],
                }
            ]
        values["networkPolicy"] = policy
    return values


def host_cidr(address: str) -> str:
    ip = ipaddress.ip_address(address)
    return f"{ip}/{32 if ip.version == 4 else 128}"


def build_kubectl(target: KindTarget, *args: str, namespaced: bool = True) -> list[str]:
    cluster = userpath.Cluster(namespace=target.namespace, context=target.context)
    return userpath.build_kubectl(cluster, *args, namespaced=namespaced)


def build_port_forward(target: KindTarget, service: str, local: int, remote: int) -> list[str]:
    return build_kubectl(
        target, "port-forward", "--address", "127.0.0.1", f"service/{service}", f"{local}:{remote}"
    )


def pods_by_service(slices_json: str) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Each Service's pods from `kubectl get endpointslices -o json`: (Ready, not
    terminating) — a pod out of readiness for a while is still there to forward to."""
    ready: dict[str, set[str]] = {}
    present: dict[str, set[str]] = {}
    for item in json.loads(slices_json).get("items") or []:
        service = (item.get("metadata", {}).get("labels") or {}).get("kubernetes.io/service-name")
        if not service:
            continue
        ready.setdefault(service, set())
        present.setdefault(service, set())
        for endpoint in item.get("endpoints") or []:
            name = (endpoint.get("targetRef") or {}).get("name")
            conditions = endpoint.get("conditions") or {}
            if name and conditions.get("ready"):
                ready[service].add(name)
            if name and not conditions.get("terminating"):
                present[service].add(name)
    return {s: (frozenset(ready[s]), frozenset(present[s])) for s in ready}


def build_kill_pod(target: KindTarget, butler: str) -> list[str]:
    """Stop the butler's pod at once (SIGTERM, SIGKILL a second later). Not `--force`:
    the command returns once the kubelet has stopped its containers, so the old process
    cannot answer after it (a forced delete leaves it running a moment, unseen)."""
    return build_kubectl(
        target,
        "delete",
        "pod",
        "--selector",
        f"butlers.dev/butler={butler}",
        "--now",
        "--wait=true",
        "--timeout=60s",
    )


def _docker(docker_host: str | None) -> list[str]:
    """docker on the engine kind runs on: the kind lane's own (DOCKER_HOST_ENV, set by
    tests/kind/lane.py), else the default one."""
    host = docker_host if docker_host is not None else os.environ.get(DOCKER_HOST_ENV)
    return ["docker", "--host", host] if host else ["docker"]


def build_node_exec(node: str, *args: str, docker_host: str | None = None) -> list[str]:
    """A command run on a kind node (its container, named as the node)."""
    return [*_docker(docker_host), "exec", node, *args]


def running_containers(pods_json: str, container: str) -> list[tuple[str, str]]:
    """(node, container ID) of `container` in each pod that runs it and is not terminating,
    from `kubectl get pods -o json`."""
    found = []
    for pod in json.loads(pods_json).get("items") or []:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            cid = status.get("containerID") or ""
            running = "running" in (status.get("state") or {})
            if status.get("name") == container and running and node and "://" in cid:
                found.append((node, cid.split("://", 1)[1]))
    return found


def container_pid(inspect_json: str) -> int:
    """The process ID, on its node, of a container's first process (`crictl inspect`)."""
    try:
        pid = int(json.loads(inspect_json)["info"]["pid"])
    except (ValueError, KeyError, TypeError) as exc:
        raise KindCommandError(f"crictl inspect gave no process ID ({exc!r})") from None
    if pid <= 0:
        raise KindCommandError(
            f"crictl inspect gave process ID {pid}: the container is not running"
        )
    return pid


def build_freeze(node: str, pid: int, docker_host: str | None = None) -> list[str]:
    """SIGSTOP the process on its node: it never runs again, so the SIGTERM of its pod's
    deletion goes unhandled until the SIGKILL that follows, as in a crash (a running
    butler would shut down cleanly on SIGTERM, expiring what it held)."""
    return build_node_exec(node, "kill", "-STOP", str(pid), docker_host=docker_host)


def build_cordon(target: KindTarget, schedulable: bool) -> list[str]:
    """Every node cordoned (no new pod scheduled) or uncordoned: how a killed butler stays
    down until its restart, as a crashed one held down does on the other backends (its
    Deployment's replacement pod waits, Pending, for the uncordon)."""
    verb = "uncordon" if schedulable else "cordon"
    return build_kubectl(target, verb, "--selector", "kubernetes.io/hostname")


def build_get_pods(target: KindTarget, butler: str) -> list[str]:
    return build_kubectl(
        target, "get", "pods", "--selector", f"butlers.dev/butler={butler}", "-o", "json"
    )


def ready_pod_uids(pods_json: str, exclude: Iterable[str] = ()) -> list[str]:
    """UIDs of Ready pods that are not terminating and not in `exclude` (the killed ones)."""
    excluded = set(exclude)
    ready = []
    for pod in json.loads(pods_json).get("items") or []:
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp") or meta["uid"] in excluded:
            continue
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        if conditions.get("Ready") == "True":
            ready.append(meta["uid"])
    return ready


def pod_uids(pods_json: str) -> list[str]:
    return [p["metadata"]["uid"] for p in json.loads(pods_json).get("items") or []]


def build_network_inspect(network: str = "kind", docker_host: str | None = None) -> list[str]:
    """kind's network on the engine kind runs on: the kind lane's own (DOCKER_HOST_ENV, set
    by tests/kind/lane.py), else the default one."""
    return [
        *_docker(docker_host),
        "network",
        "inspect",
        network,
        "--format",
        "{{json .IPAM.Config}}",
    ]


def pick_ipv4_gateway(ipam_json: str, network: str = "kind") -> str:
    """The host's IPv4 address on kind's Docker network: how pods reach this machine.

    A dual-stack network lists its IPv6 subnet first on some Docker versions.
    """
    for entry in json.loads(ipam_json or "null") or []:
        gateway = (entry or {}).get("Gateway") or ""
        try:
            if ipaddress.ip_address(gateway).version == 4:
                return gateway
        except ValueError:
            continue
    raise KindCommandError(
        f"docker network {network!r} has no IPv4 gateway ({ipam_json.strip()!r}): pods could "
        "not reach this machine's script server"
    )


def rewrite_host(url: str, host: str, port: int | None = None) -> str:
    """The URL (or DSN) with its host, and optionally its port, replaced."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    new_port = port if port is not None else parts.port
    netloc = f"{userinfo}{host}" + (f":{new_port}" if new_port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
