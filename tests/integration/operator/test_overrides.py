"""Pod overrides taken out of a Butler leave its Deployment, and drift of `false` values
(which a merge patch can only restore if it is seen) is repaired."""

from __future__ import annotations

from typing import Any

from .conftest import BUTLERS_PATH, KINDS, NAMESPACE, Cluster, eventually, running_operator

OVERRIDES = {
    "nodeSelector": {"disk": "ssd"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "butlers"}],
    "affinity": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                    },
                }
            ]
        }
    },
    "priorityClassName": "butlers",
    "imagePullSecrets": ["regcred"],
    "labels": {"team": "home"},
    "annotations": {"example.com/note": "hello"},
}
SCHEDULING = ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets")
RESTARTED = "kubectl.kubernetes.io/restartedAt"


def _template(deployment: dict[str, Any] | None) -> dict[str, Any]:
    return ((deployment or {}).get("spec") or {}).get("template") or {}


async def test_removing_pod_overrides_reaches_the_deployment(
    cluster: Cluster, make_settings: Any
) -> None:
    path = KINDS["Deployment"].format(ns=NAMESPACE, name="health")
    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler("health", pod=OVERRIDES)

        async def overridden() -> dict[str, Any] | None:
            template = _template(await cluster.owned("health", "Deployment"))
            spec = template.get("spec") or {}
            return template if all(key in spec for key in SCHEDULING) else None

        template = await eventually(overridden, "the overrides on the Deployment")
        assert template["metadata"]["labels"]["team"] == "home"
        assert template["metadata"]["annotations"]["example.com/note"] == "hello"
        # Someone else's annotation (`kubectl rollout restart`) is not the Butler's to remove.
        await cluster.patch(
            path, {"spec": {"template": {"metadata": {"annotations": {RESTARTED: "now"}}}}}
        )
        await cluster.patch(
            f"{BUTLERS_PATH}/health", {"metadata": {"generation": 2}, "spec": {"pod": None}}
        )

        async def cleared() -> dict[str, Any] | None:
            template = _template(await cluster.owned("health", "Deployment"))
            spec = template.get("spec") or {}
            meta = template.get("metadata") or {}
            gone = (
                not any(key in spec for key in SCHEDULING)
                and "team" not in (meta.get("labels") or {})
                and "example.com/note" not in (meta.get("annotations") or {})
            )
            return template if gone else None

        template = await eventually(cleared, "the overrides to leave the Deployment")
    assert template["metadata"]["annotations"][RESTARTED] == "now"
    assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "butler"


async def test_drift_of_false_values_is_restored(cluster: Cluster, make_settings: Any) -> None:
    path = KINDS["Deployment"].format(ns=NAMESPACE, name="health")
    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler("health")
        deployment = await eventually(lambda: cluster.owned("health", "Deployment"), "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        containers = [
            c | {"securityContext": {k: v for k, v in c["securityContext"].items()
                                     if k != "allowPrivilegeEscalation"}}
            for c in pod["containers"]
        ]  # fmt: skip
        await cluster.patch(
            path,
            {
                "spec": {
                    "template": {
                        "spec": {"automountServiceAccountToken": None, "containers": containers}
                    }
                }
            },
        )

        async def restored() -> bool:
            spec = _template(await cluster.owned("health", "Deployment"))["spec"]
            return spec.get("automountServiceAccountToken") is False and all(
                c["securityContext"].get("allowPrivilegeEscalation") is False
                for c in spec["containers"]
            )

        await eventually(restored, "automountServiceAccountToken and allowPrivilegeEscalation")
