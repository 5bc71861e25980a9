"""What only a real node shows of an installed ecosystem (the kind lane; skipped elsewhere).

The other backends run pods as processes of this machine: no pod network, no enforced
NetworkPolicy, no container runtime confining a process, no volume outliving its pod.
Here, with kubectl exec into the pods the operator rendered:
- the restricted Pod Security profile as the runtime applies it (user, capabilities,
  no privilege escalation, seccomp, read-only root);
- the rendered NetworkPolicies: a butler reaches the switchboard (registration) and DNS,
  never another butler, and a pod of another namespace reaches no butler;
- the chart's development PostgreSQL keeps its data on its PVC when its pod is replaced,
  and the butlers' readiness, checked by the kubelet, follows it down and back.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
import yaml

from tests.kind import pins

from .harness.ecosystem import EcosystemHandle
from .harness.kind_node import in_pod, kubectl, roles
from .harness.kind_node import pods as _pods
from .harness.kind_node import ready as _ready
from .harness.kind_node import wait_for as _wait

CONNECT_SECONDS = 4


def connect_code(host: str, port: int) -> str:
    return (
        "import socket\n"
        f"s = socket.socket(); s.settimeout({CONNECT_SECONDS})\n"
        f"try:\n    s.connect(({host!r}, {port})); print('ok')\n"
        "except TimeoutError: print('timeout')\n"
        "except OSError as e: print('error', e)\n"
    )


@pytest.fixture(scope="module")
def cluster(kind_context: str, butler_ecosystem: EcosystemHandle) -> tuple[str, str]:
    assert butler_ecosystem.namespace is not None
    return kind_context, butler_ecosystem.namespace


def test_pods_run_restricted_under_the_real_runtime(cluster: tuple[str, str]) -> None:
    context, namespace = cluster
    _, _, others = roles()
    code = (
        "import os\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "print(os.getuid(), status['CapEff'].strip(), status['NoNewPrivs'].strip(),"
        " status['Seccomp'].strip())\n"
        "try:\n    open('/written', 'w'); print('writable')\n"
        "except OSError: print('read-only')\n"
    )
    uid, caps, no_new_privs, seccomp, root = in_pod(context, namespace, others[0][0], code).split()
    # 2: a seccomp filter (RuntimeDefault) is in force; no capability at all.
    assert (uid, caps, no_new_privs, seccomp, root) == (
        "10001",
        "0000000000000000",
        "1",
        "2",
        "read-only",
    )


def test_network_policies_allow_the_documented_flows_and_drop_the_rest(
    cluster: tuple[str, str],
) -> None:
    context, namespace = cluster
    board, board_port, others = roles()
    (butler, _), (peer, peer_port) = others[0], others[1]
    svc = f"{namespace}.svc.cluster.local"
    # DNS, and the switchboard (registration, heartbeats).
    assert in_pod(context, namespace, butler, connect_code(f"{board}.{svc}", board_port)) == "ok\n"
    # Another butler: dropped by its policy (a timeout, not a refusal).
    assert in_pod(context, namespace, butler, connect_code(f"{peer}.{svc}", peer_port)) == (
        "timeout\n"
    )
    # The switchboard may call every butler (dispatch).
    assert in_pod(context, namespace, board, connect_code(f"{peer}.{svc}", peer_port)) == "ok\n"
    # A pod of another namespace reaches no butler, not even the switchboard.
    stranger = f"butlers-stranger-{secrets.token_hex(3)}"
    kubectl(context, "create", "namespace", stranger)
    try:
        pod = probe_pod()
        kubectl(context, "-n", stranger, "apply", "-f", "-", stdin=yaml.safe_dump(pod))
        kubectl(context, "-n", stranger, "wait", "--for=condition=Ready", "pod/probe",
                "--timeout=90s", timeout=120)  # fmt: skip
        script = (
            f"timeout {CONNECT_SECONDS} bash -c 'cat < /dev/tcp/{board}.{svc}/{board_port}';"
            ' echo "rc=$?"'
        )
        out = kubectl(context, "-n", stranger, "exec", "probe", "--", "bash", "-c", script)
        assert "rc=124" in out  # timed out
    finally:
        kubectl(context, "delete", "namespace", stranger, "--wait=false")


def probe_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "probe",
                    "image": pins.TOOLS_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "infinity"],
                }
            ],
        },
    }


def psql(context: str, namespace: str, sql: str) -> str:
    argv = ["psql", "-h", "/var/run/postgresql", "-U", "postgres", "-d", "butlers", "-Atc", sql]
    return kubectl(context, "-n", namespace, "exec", "deploy/butlers-postgres", "--", *argv)


@pytest.mark.timeout(420)
def test_the_dev_postgres_keeps_its_data_across_pods_and_readiness_follows_it(
    cluster: tuple[str, str],
) -> None:
    context, namespace = cluster
    _, _, others = roles()
    butler = f"butlers.dev/butler={others[0][0]}"
    database = "app.kubernetes.io/name=butlers-postgres"
    marker = secrets.token_hex(4)
    psql(context, namespace, f"CREATE TABLE kind_pvc_{marker} (v text); "
         f"INSERT INTO kind_pvc_{marker} VALUES ('{marker}')")  # fmt: skip

    def butler_ready() -> bool:
        pods = [
            p for p in _pods(context, namespace, butler) if "deletionTimestamp" not in p["metadata"]
        ]
        return bool(pods) and all(_ready(p) for p in pods)

    scale = ["-n", namespace, "scale", "deployment/butlers-postgres"]
    # No database pod at all: the kubelet's readiness probe takes the butler out of service.
    kubectl(context, *scale, "--replicas=0")
    _wait("the database pod is gone", lambda: not _pods(context, namespace, database), 120)
    _wait("the butler is unready without its database", lambda: not butler_ready(), 120)
    # A new pod on the same claim: the data is there and the butler is back.
    kubectl(context, *scale, "--replicas=1")
    _wait("a new database pod is Ready",
          lambda: any(_ready(p) for p in _pods(context, namespace, database)), 180)  # fmt: skip
    _wait("the butler is Ready again", butler_ready, 120)
    assert psql(context, namespace, f"SELECT v FROM kind_pvc_{marker}").strip() == marker
    psql(context, namespace, f"DROP TABLE kind_pvc_{marker}")
