"""Declaring the API the operator uses on kmock's Kubernetes emulator.

For tests, benchmarks and the offline e2e backend only (needs the `kmock` dev
dependency); the operator itself never imports this module.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonpatch
import kmock

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
    # The operator watches its Deployments' rollouts: advertise the watch, or kopf skips
    # them ("non-watchable resources will not be served") and Ready never follows a rollout.
    server.resources["apps/v1/deployments"] = kmock.ResourceInfo(
        kind="Deployment",
        namespaced=True,
        subresources={"status"},
        verbs={"list", "watch", "get", "patch", "create", "delete"},
    )
    server.objects["v1/namespaces", None, namespace] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "resourceVersion": "1"},
    }


class VersionedEmulator(kmock.KubernetesEmulator):
    """kmock's emulator made to behave like an API server where the operator's scale depends
    on it: a resourceVersion that moves on every write, and (with `recent_only`) a cost per
    request that does not grow with the number of requests served.

    kmock keeps whatever resourceVersion a client sent, so every version of an object
    looks the same. kopf tells its own writes from older events by that version (its
    consistency wait): without it, the event of a status write made *during* a handler
    looks like the object before kopf recorded the handler as done, and kopf runs the
    creation again, once per stale event.

    kmock finds the reaction for a request by scanning its whole request log for it
    (`request in view`, for each reaction), so each request costs O(requests served so
    far): a burst of 50 Butlers costs the emulator O(requests²), and that, not the
    operator, was where the time went. With `recent_only` the log it scans holds only
    the requests being served; `len(emulator[...])` then counts only those, so tests that
    count requests leave it off.
    """

    def __init__(self, *args: Any, recent_only: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.versions = itertools.count(2)
        self.recent_only = recent_only
        self.serving: list[Any] = []

    async def _handle(self, request: Any) -> Any:
        data = request.data
        writes = request.action in ("CREATE", "UPDATE")
        if request.resource is not None and writes and isinstance(data, dict):
            metadata = data.setdefault("metadata", {})
            if isinstance(metadata, dict):
                metadata["resourceVersion"] = str(next(self.versions))
        self.serving.append(request)
        try:
            return await super()._handle(request)
        except jsonpatch.JsonPatchTestFailed as exc:
            # As the API server answers a JSON patch whose `test` failed (the object moved
            # on since the client read it): 422, which a client re-reads after, not a 500
            # it repeats unchanged.
            raise kmock.KubernetesError(status=422, reason="Invalid", message=str(exc)) from None
        finally:
            self.serving.remove(request)

    def __iter__(self) -> Any:
        if self.recent_only:
            return iter(list(self.serving))
        return super().__iter__()
