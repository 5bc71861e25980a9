"""Finalizers only where deletion has work, names and runtimes the cluster cannot run,
drift on server-normalized values, and turning NetworkPolicies off."""

from __future__ import annotations

from typing import Any

from butlers_operator.handlers import FINALIZER
from butlers_operator.settings import NetworkPolicySettings

from .conftest import BUTLERS_PATH, KINDS, NAMESPACE, Cluster, eventually, running_operator


async def _database_ready(cluster: Cluster, name: str) -> bool:
    return (await cluster.condition(name, "DatabaseReady")).get("status") == "True"


async def test_only_a_butler_whose_deletion_drops_data_gets_the_finalizer(
    cluster: Cluster, make_settings: Any
) -> None:
    async def finalizers(name: str) -> list[str]:
        return list(((await cluster.butler(name)) or {})["metadata"].get("finalizers") or [])

    async with running_operator(make_settings()):
        await cluster.create_butler("keeper")
        await cluster.create_butler("dropper", database={"reclaimPolicy": "Delete"})
        await eventually(lambda: _database_ready(cluster, "keeper"), "keeper provisioned")
        await eventually(lambda: _database_ready(cluster, "dropper"), "dropper provisioned")
        await eventually(lambda: finalizers("dropper"), "the finalizer on dropper")
        assert await finalizers("dropper") == [FINALIZER]
        assert await finalizers("keeper") == []
        # Switching to Retain removes it; nothing is left to block a deletion.
        await cluster.patch(
            f"{BUTLERS_PATH}/dropper",
            {"metadata": {"generation": 2}, "spec": {"database": {"reclaimPolicy": "Retain"}}},
        )

        async def released() -> bool:
            return await finalizers("dropper") == []

        await eventually(released, "the finalizer to go with reclaimPolicy Retain")
    # The operator is gone (uninstalled with its Butlers): deleting them does not hang.
    for name in ("keeper", "dropper"):
        await cluster.delete(f"{BUTLERS_PATH}/{name}")
        assert await cluster.butler(name) is None


async def test_an_invalid_name_and_an_unrunnable_runtime_are_stalled_with_a_reason(
    cluster: Cluster, make_settings: Any
) -> None:
    async with running_operator(make_settings()):
        await cluster.create_butler("Health")
        await cluster.create_butler("coder", runtime={"adapter": "claude-code"})

        async def stalled(name: str) -> dict[str, Any] | None:
            condition = await cluster.condition(name, "Stalled")
            return condition if condition.get("status") == "True" else None

        name = await eventually(lambda: stalled("Health"), "Health stalled")
        runtime = await eventually(lambda: stalled("coder"), "coder stalled")
    assert name["reason"] == "InvalidSpec" and "metadata.name" in name["message"]
    assert runtime["reason"] == "UnsupportedRuntime" and "claude" in runtime["message"]
    assert await cluster.owned("coder", "Deployment") is None


async def test_server_normalized_values_are_not_drift(
    cluster: Cluster, make_settings: Any, kmock: Any
) -> None:
    path = KINDS["Deployment"].format(ns=NAMESPACE, name="health")
    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler(
            "health",
            resources={"requests": {"cpu": "0.5", "memory": "1Gi"}},
            env=[{"name": "EMPTY", "value": ""}],
        )
        deployment = await eventually(lambda: cluster.owned("health", "Deployment"), "Deployment")
        # What a real API server stores: quantities canonical, empty values dropped.
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        container["resources"]["requests"] = {"cpu": "500m", "memory": "1Gi"}
        container["env"] = [
            {"name": e["name"]} if e.get("value") == "" else e for e in container["env"]
        ]
        await cluster.patch(path, {"spec": {"template": {"spec": {"containers": [container]}}}})
        patches = len(kmock[f"patch {path}"])
        reads = len(kmock[f"get {path}"])
        await eventually(lambda: len(kmock[f"get {path}"]) >= reads + 3, "three resyncs")
        assert len(kmock[f"patch {path}"]) == patches


async def test_turning_network_policies_off_removes_them(
    cluster: Cluster, make_settings: Any
) -> None:
    async with running_operator(make_settings()):
        await cluster.create_butler("health")
        await eventually(lambda: cluster.owned("health", "NetworkPolicy"), "the NetworkPolicy")
    off = make_settings(network_policy=NetworkPolicySettings(enabled=False))
    async with running_operator(off):

        async def gone() -> bool:
            return await cluster.owned("health", "NetworkPolicy") is None

        await eventually(gone, "the NetworkPolicy to be deleted")
        assert await cluster.owned("health", "Deployment") is not None


async def test_rotating_a_secret_the_pod_reads_rolls_the_pod(
    cluster: Cluster, make_settings: Any
) -> None:
    import base64

    secrets = f"/api/v1/namespaces/{NAMESPACE}/secrets"
    keys = {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "llm-keys", "namespace": NAMESPACE},
        "data": {"OPENAI_API_KEY": base64.b64encode(b"sk-old").decode()},
    }  # fmt: skip
    async with cluster.session.post(secrets, json=keys) as resp:
        assert resp.status < 300

    async def template_hash() -> str | None:
        deployment = await cluster.owned("health", "Deployment") or {}
        metadata = deployment.get("spec", {}).get("template", {}).get("metadata", {})
        return metadata.get("annotations", {}).get("butlers.dev/config-hash")

    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler(
            "health", runtime={"adapter": "openai", "credentialsSecret": "llm-keys"}
        )
        before = await eventually(template_hash, "the first pod template")
        rotated = base64.b64encode(b"sk-new").decode()
        await cluster.patch(f"{secrets}/llm-keys", {"data": {"OPENAI_API_KEY": rotated}})

        async def rolled() -> str | None:
            current = await template_hash()
            return current if current and current != before else None

        await eventually(rolled, "a new pod template after the rotation")


async def test_a_resync_that_repairs_an_object_posts_its_event(
    cluster: Cluster, make_settings: Any, kmock: Any
) -> None:
    # Through kopf's own Event poster: the resync loop runs where kopf can post.
    events = f"post /api/v1/namespaces/{NAMESPACE}/events"

    def posted(message: str) -> int:
        return sum(1 for r in kmock[events] if (r.data or {}).get("message") == message)

    path = KINDS["ConfigMap"].format(ns=NAMESPACE, name="health")
    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler("health")
        await eventually(lambda: cluster.owned("health", "ConfigMap"), "the ConfigMap")
        created = "created ConfigMap/health-spec"
        await eventually(lambda: posted(created), "the creation's Event")
        await cluster.delete(path)
        await eventually(lambda: cluster.owned("health", "ConfigMap"), "the ConfigMap again")
        await eventually(lambda: posted(created) == 2, "the repair's Event")
