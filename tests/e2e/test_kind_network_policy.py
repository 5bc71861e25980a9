"""NetworkPolicy is enforced on the kind lane's cluster, not merely accepted.

An API server stores any NetworkPolicy; only the node's enforcer (kube-network-policies,
patched to queue through the xtables NFQUEUE target) makes it true. In a namespace of
its own: a server, a client the policy admits and one it does not. Before the policy
both connect (so a later failure is the policy's doing); after it the admitted client
still gets an answer, by pod IP and through the Service's DNS name, and the other one's
connection times out (dropped, not refused). Relabelling the second client admits it.
Runs on `--kind` only; the namespace is deleted at the end.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.kind import pins

from .harness.kind_node import kubectl

PORT = 8080
CONNECT_SECONDS = 4  # a dropped SYN is retried for longer than this


@pytest.fixture(scope="module")
def context(kind_context: str) -> str:
    return kind_context


def pod(name: str, role: str, command: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"role": role}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": pins.TOOLS_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["bash", "-c", command],
                }
            ],
        },
    }


SERVER = f"exec socat TCP-LISTEN:{PORT},fork,reuseaddr SYSTEM:'echo ok'"
POLICY = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "web-from-clients"},
    "spec": {
        "podSelector": {"matchLabels": {"role": "web"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                "ports": [{"protocol": "TCP", "port": PORT}],
            }
        ],
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web"},
    "spec": {"selector": {"role": "web"}, "ports": [{"port": PORT, "targetPort": PORT}]},
}


@pytest.fixture(scope="module")
def namespace(context: str) -> Iterator[str]:
    name = f"butlers-np-{secrets.token_hex(3)}"
    kubectl(context, "create", "namespace", name)
    try:
        documents = [
            pod("web", "web", SERVER),
            pod("client", "client", "exec sleep infinity"),
            pod("other", "other", "exec sleep infinity"),
            SERVICE,
        ]
        kubectl(context, "-n", name, "apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
        kubectl(context, "-n", name, "wait", "--for=condition=Ready", "pod", "--all",
                "--timeout=120s", timeout=150)  # fmt: skip
        yield name
    finally:
        kubectl(context, "delete", "namespace", name, "--wait=false")


def connect(context: str, namespace: str, client: str, host: str) -> tuple[str, float]:
    """("ok" | "timeout" | "refused: ..." , seconds) of one TCP connection from `client`."""
    script = f"timeout {CONNECT_SECONDS} bash -c 'cat < /dev/tcp/{host}/{PORT}'; echo \"rc=$?\""
    started = time.monotonic()
    out = kubectl(context, "-n", namespace, "exec", client, "--", "bash", "-c", script)
    elapsed = time.monotonic() - started
    if "rc=124" in out:
        return "timeout", elapsed
    if out.startswith("ok"):
        return "ok", elapsed
    return f"refused: {out.strip()}", elapsed


def web_ip(context: str, namespace: str) -> str:
    pod_json = json.loads(kubectl(context, "-n", namespace, "get", "pod", "web", "-o", "json"))
    return str(pod_json["status"]["podIP"])


def until(context: str, namespace: str, client: str, host: str, want: str) -> str:
    """The outcome once it is `want`, or the last one after 60 s (policies apply in ~1 s)."""
    deadline = time.monotonic() + 60
    while True:
        outcome, _ = connect(context, namespace, client, host)
        if outcome == want or time.monotonic() > deadline:
            return outcome
        time.sleep(1)


def test_a_network_policy_drops_what_it_does_not_allow(context: str, namespace: str) -> None:
    ip = web_ip(context, namespace)
    # Without a policy every pod reaches the server: the network itself works.
    assert connect(context, namespace, "client", ip)[0] == "ok"
    assert connect(context, namespace, "other", ip)[0] == "ok"

    kubectl(context, "-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump(POLICY))
    assert until(context, namespace, "other", ip, "timeout") == "timeout"
    outcome, seconds = connect(context, namespace, "other", ip)
    assert (outcome, seconds >= CONNECT_SECONDS) == ("timeout", True)
    # The Service's name (CoreDNS) and ClusterIP (kube-proxy) lead to the same verdicts.
    assert connect(context, namespace, "other", "web")[0] == "timeout"
    assert connect(context, namespace, "client", ip)[0] == "ok"
    assert connect(context, namespace, "client", "web")[0] == "ok"

    # A label the policy names admits a pod it dropped a moment ago.
    kubectl(context, "-n", namespace, "label", "pod", "other", "role=client", "--overwrite")
    assert until(context, namespace, "other", ip, "ok") == "ok"
