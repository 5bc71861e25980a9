"""The user path both cluster backends follow: kubectl's target and the session namespace."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import userpath


def test_kubectl_addresses_the_kubeconfig_context_and_namespace() -> None:
    cluster = userpath.Cluster("ns1", kubeconfig=Path("/k/admin.kubeconfig"), context="ctx")
    argv = userpath.build_kubectl(cluster, "get", "butlers")
    assert argv[0].endswith("kubectl")
    assert argv[1:] == [
        "--kubeconfig",
        "/k/admin.kubeconfig",
        "--context",
        "ctx",
        "--namespace",
        "ns1",
        "get",
        "butlers",
    ]
    assert "--namespace" not in userpath.build_kubectl(cluster, "get", "nodes", namespaced=False)


def test_the_session_namespace_enforces_the_restricted_pod_security_standard() -> None:
    namespace = userpath.build_namespace(userpath.Cluster("butlers-e2e-abc"))
    assert namespace["metadata"]["name"] == "butlers-e2e-abc"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_secrets_carry_their_values_base64_encoded() -> None:
    secret = userpath.build_secret("env", "ns1", {"A": "b c"})
    assert secret["metadata"] == {"name": "env", "namespace": "ns1"}
    assert secret["data"] == {"A": "YiBj"}
