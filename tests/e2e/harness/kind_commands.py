"""The `kind` backend's commands and checks, as pure functions (unit-tested apart).

Each `build_*` returns an argv; nothing here runs a process except
`kind_unavailable_reason`, which asks `docker info` whether an engine answers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLUSTER = "butlers"  # kind-config.yaml's `name`
REGISTRY = "ghcr.io/butlers-dev"
TAG = "0.1.0"
RELEASE = "butlers"
ENV_SECRET = "butlers-e2e-env"
POSTGRES_SERVICE = f"{RELEASE}-postgres"
POSTGRES_ADMIN_SECRET = f"{RELEASE}-postgres-admin"


@dataclass(frozen=True)
class KindTarget:
    """Where and what a session installs."""

    namespace: str
    context: str = f"kind-{CLUSTER}"
    cluster: str = CLUSTER
    registry: str = REGISTRY
    tag: str = TAG

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


def build_kind_load(target: KindTarget) -> list[str]:
    return [
        "kind", "load", "docker-image", "--name", target.cluster,
        target.butler_image, target.operator_image,
    ]  # fmt: skip


def build_chart_values(target: KindTarget, schema_prefix: str) -> dict[str, Any]:
    """The operator chart for one session: its own PostgreSQL, the e2e env Secret, our images."""
    return {
        "image": {"repository": f"{target.registry}/operator", "tag": target.tag},
        "butlerImage": {"repository": f"{target.registry}/butler", "tag": target.tag},
        "butlerEnvSecret": ENV_SECRET,
        "postgres": {"enabled": True},
        "database": {"schemaPrefix": schema_prefix},
        "resyncSeconds": 5,
    }


def build_helm_install(chart: Path, values_file: Path, target: KindTarget) -> list[str]:
    return [
        "helm", "upgrade", "--install", RELEASE, str(chart),
        "--namespace", target.namespace, "--create-namespace",
        "--kube-context", target.context,
        "--values", str(values_file), "--wait", "--timeout", "5m",
    ]  # fmt: skip


def build_kubectl(target: KindTarget, *args: str, namespaced: bool = True) -> list[str]:
    base = ["kubectl", "--context", target.context]
    if namespaced:
        base += ["--namespace", target.namespace]
    return [*base, *args]


def build_apply(target: KindTarget, namespaced: bool = True) -> list[str]:
    """`kubectl apply` of YAML on stdin (server-side: shared CRDs apply idempotently)."""
    return build_kubectl(
        target,
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        namespaced=namespaced,
    )


def build_wait_ready(target: KindTarget, timeout_seconds: int = 300) -> list[str]:
    return build_kubectl(
        target, "wait", "butlers", "--all", "--for=condition=Ready", f"--timeout={timeout_seconds}s"
    )


def build_port_forward(target: KindTarget, service: str, local: int, remote: int) -> list[str]:
    return build_kubectl(
        target, "port-forward", "--address", "127.0.0.1", f"service/{service}", f"{local}:{remote}"
    )


def build_kill_pod(target: KindTarget, butler: str) -> list[str]:
    return build_kubectl(
        target,
        "delete",
        "pod",
        "--selector",
        f"butlers.dev/butler={butler}",
        "--grace-period=0",
        "--force",
        "--wait=true",
    )


def build_rollout_status(target: KindTarget, butler: str) -> list[str]:
    return build_kubectl(target, "rollout", "status", f"deployment/{butler}", "--timeout=180s")


def build_delete_namespace(target: KindTarget) -> list[str]:
    return build_kubectl(
        target,
        "delete",
        "namespace",
        target.namespace,
        "--ignore-not-found",
        "--wait=true",
        namespaced=False,
    )


def build_network_gateway(network: str = "kind") -> list[str]:
    """The host's address on kind's Docker network: how pods reach a server on this machine."""
    return [
        "docker",
        "network",
        "inspect",
        network,
        "--format",
        "{{(index .IPAM.Config 0).Gateway}}",
    ]


def with_namespace(documents: Iterable[Mapping[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """Roster files as they are, only metadata.namespace set."""
    return [
        {**doc, "metadata": {**dict(doc["metadata"]), "namespace": namespace}} for doc in documents
    ]


def rewrite_host(url: str, host: str, port: int | None = None) -> str:
    """The URL (or DSN) with its host, and optionally its port, replaced."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    new_port = port if port is not None else parts.port
    netloc = f"{userinfo}{host}" + (f":{new_port}" if new_port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
