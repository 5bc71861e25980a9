"""Declaring the API the operator uses on kmock's Kubernetes emulator.

For tests, benchmarks and the offline e2e backend only (needs the `kmock` dev
dependency); the operator itself never imports this module.
"""

from __future__ import annotations

from typing import Any

BUTLERS_RESOURCE = "butlers.dev/v1alpha1/butlers"
OWNED_KINDS = {
    "v1/secrets": "Secret",
    "v1/configmaps": "ConfigMap",
    "v1/services": "Service",
    "v1/serviceaccounts": "ServiceAccount",
    "v1/events": "Event",
    "apps/v1/deployments": "Deployment",
    "networking.k8s.io/v1/networkpolicies": "NetworkPolicy",
}


def declare_cluster(server: Any, namespace: str) -> None:
    """The resources the operator discovers, watches and writes, and one namespace."""
    import kmock

    server.resources["v1/namespaces"] = kmock.ResourceInfo(kind="Namespace", namespaced=False)
    server.resources[BUTLERS_RESOURCE] = kmock.ResourceInfo(
        kind="Butler",
        namespaced=True,
        singular="butler",
        subresources={"status"},
        verbs={"list", "watch", "get", "patch", "create", "delete"},
    )
    for key, kind in OWNED_KINDS.items():
        server.resources[key] = kmock.ResourceInfo(kind=kind, namespaced=True)
    server.objects["v1/namespaces", None, namespace] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "resourceVersion": "1"},
    }
