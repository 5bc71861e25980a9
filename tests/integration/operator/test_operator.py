"""The operator against kmock's Kubernetes emulator and a real PostgreSQL."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from butlers.db.provision import deprovision
from butlers_operator.render import CONFIG_HASH_ANNOTATION

from .conftest import (
    BUTLERS_PATH,
    KINDS,
    NAMESPACE,
    Cluster,
    eventually,
    execute,
    fetch,
    running_operator,
)


def _secret_value(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


async def _database_ready(cluster: Cluster, name: str) -> bool:
    return (await cluster.condition(name, "DatabaseReady")).get("status") == "True"


async def test_create_provisions_database_and_owned_objects(cluster, make_settings) -> None:  # type: ignore[no-untyped-def]
    async with running_operator(make_settings()):
        await cluster.create_butler("health")
        await eventually(lambda: _database_ready(cluster, "health"), "DatabaseReady=True")
        for kind in KINDS:
            obj = await eventually(lambda k=kind: cluster.owned("health", k), kind)
            (owner,) = obj["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == (
                "Butler",
                f"uid-{NAMESPACE}-health",
                True,
            )
        status = (await cluster.butler("health"))["status"]
    assert status["endpoint"] == f"http://health.{NAMESPACE}.svc:40103/mcp"
    assert status["observedGeneration"] == 1
    assert status["phase"] == "Provisioning"  # no Deployment controller in the emulator
    secret = await cluster.owned("health", "Secret")
    schema = _secret_value(secret, "schema")
    assert await fetch(_secret_value(secret, "dsn"), "SELECT current_schema()") == schema


async def test_spec_change_rolls_the_pod_template(cluster, make_settings) -> None:  # type: ignore[no-untyped-def]
    async def template_hash() -> str | None:
        deployment = await cluster.owned("health", "Deployment") or {}
        annotations = deployment.get("spec", {}).get("template", {}).get("metadata", {})
        return annotations.get("annotations", {}).get(CONFIG_HASH_ANNOTATION)

    async with running_operator(make_settings()):
        await cluster.create_butler("health")
        before = await eventually(template_hash, "a rendered Deployment")
        await cluster.patch(
            f"{BUTLERS_PATH}/health",
            {"metadata": {"generation": 2}, "spec": {"instructions": "Answer in one line."}},
        )
        after = await eventually(lambda: _changed(template_hash, before), "a new pod-template hash")
        config = await cluster.owned("health", "ConfigMap")
    assert after != before
    assert "Answer in one line." in config["data"]["butler.yaml"]


async def _changed(probe: Any, before: str) -> str | None:
    value = await probe()
    return value if value and value != before else None


async def test_deleted_service_and_edited_deployment_come_back(cluster, make_settings) -> None:  # type: ignore[no-untyped-def]
    async with running_operator(make_settings()):
        await cluster.create_butler("health")
        await eventually(lambda: cluster.owned("health", "Service"), "the Service")
        await eventually(lambda: cluster.owned("health", "Deployment"), "the Deployment")
        await cluster.delete(KINDS["Service"].format(ns=NAMESPACE, name="health"))
        deployment_path = KINDS["Deployment"].format(ns=NAMESPACE, name="health")
        await cluster.patch(deployment_path, {"spec": {"replicas": 3}})
        await eventually(lambda: cluster.owned("health", "Service"), "the Service to come back")

        async def one_replica() -> bool:
            return (await cluster.get(deployment_path))["spec"]["replicas"] == 1

        await eventually(one_replica, "replicas back to 1")


@pytest.mark.parametrize(
    ("policy", "kept"), [("Retain", True), ("Delete", False)], ids=["retain", "delete"]
)
async def test_delete_applies_the_reclaim_policy(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, policy: str, kept: bool
) -> None:
    async with running_operator(make_settings()):
        await cluster.create_butler("health", database={"reclaimPolicy": policy})
        await eventually(lambda: _database_ready(cluster, "health"), "DatabaseReady=True")
        secret = await cluster.owned("health", "Secret")
        schema, dsn = _secret_value(secret, "schema"), _secret_value(secret, "dsn")
        await execute(dsn, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('x')")
        await cluster.delete(f"{BUTLERS_PATH}/health")

        async def gone() -> bool:
            return await cluster.butler("health") is None

        await eventually(gone, "the finalizer to release the Butler")
    has_schema = await fetch(
        operator_admin_dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema
    )
    has_role = await fetch(
        operator_admin_dsn, "SELECT count(*) FROM pg_roles WHERE rolname = $1", schema
    )
    assert (has_schema, has_role) == ((1, 1) if kept else (0, 0))
    if kept:
        assert await fetch(operator_admin_dsn, f'SELECT body FROM "{schema}".notes') == "x"
        await deprovision(operator_admin_dsn, schema)


async def test_unreachable_database_is_reported_then_recovers(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, kmock
) -> None:
    closed = "postgresql://postgres:x@127.0.0.1:9/butlers"
    secret_path = f"/api/v1/namespaces/{NAMESPACE}/secrets"
    admin = {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "pg-admin", "namespace": NAMESPACE},
        "data": {"dsn": base64.b64encode(closed.encode()).decode()},
    }  # fmt: skip
    async with cluster.session.post(secret_path, json=admin) as resp:
        assert resp.status < 300
    settings = make_settings(admin_dsn=None, admin_secret="pg-admin", operator_namespace=NAMESPACE)
    events: list[tuple[str, str, str, str]] = []
    async with running_operator(settings, events=events):
        await cluster.create_butler("health")

        async def unreachable() -> dict[str, Any] | None:
            condition = await cluster.condition("health", "DatabaseReady")
            return condition if condition.get("status") == "False" else None

        condition = await eventually(unreachable, "DatabaseReady=False")
        assert condition["reason"] == "DatabaseUnreachable"
        assert "127.0.0.1:9" in condition["message"]
        # A transient problem: in progress, not stalled (kstatus), and one Warning only.
        assert (await cluster.condition("health", "Reconciling"))["status"] == "True"
        assert (await cluster.condition("health", "Stalled"))["status"] == "False"
        await eventually(
            lambda: len(kmock["get /api/v1/namespaces/home/secrets/pg-admin"]) > 4, "retries"
        )
        warnings = [e for e in events if e[1] == "Warning"]
        assert [e[2] for e in warnings] == ["DatabaseUnreachable"]
        fixed = base64.b64encode(operator_admin_dsn.encode()).decode()
        await cluster.patch(f"{secret_path}/pg-admin", {"data": {"dsn": fixed}})
        await eventually(lambda: _database_ready(cluster, "health"), "recovery")
        ready = await cluster.condition("health", "Ready")
    assert ready["reason"] != "DatabaseUnreachable"


async def test_invalid_spec_names_the_field_in_status(cluster, make_settings) -> None:  # type: ignore[no-untyped-def]
    async with running_operator(make_settings()):
        await cluster.create_butler("health", port=80)

        async def failed() -> dict[str, Any] | None:
            butler = await cluster.butler("health") or {}
            return butler.get("status") if butler.get("status", {}).get("phase") else None

        status = await eventually(failed, "a status")
        ready = await cluster.condition("health", "Ready")
    assert status["phase"] == "Failed"
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "spec.port" in ready["message"]
    assert await cluster.owned("health", "Deployment") is None


async def test_a_messenger_owner_that_disagrees_with_the_switchboards_is_refused(  # type: ignore[no-untyped-def]
    cluster, make_settings
) -> None:
    board = {"switchboard": {"owner": {"telegram": [5550001], "email": ["owner@example.org"]}}}
    own = {"messenger": {"owner": {"telegram": ["5550002"]}}}
    async with running_operator(make_settings()):
        await cluster.create_butler("switchboard", roster="switchboard", modules=board)
        await cluster.create_butler("messenger", roster="messenger", modules=own)

        async def refused() -> dict[str, Any] | None:
            ready = await cluster.condition("messenger", "Ready") or {}
            return ready if ready.get("reason") == "OwnerDisagrees" else None

        ready = await eventually(refused, "Ready=False, OwnerDisagrees")
        status = (await cluster.butler("messenger") or {})["status"]
    assert (status["phase"], ready["status"]) == ("Failed", "False")
    assert ready["message"] == (
        "Butler home/messenger: spec.modules.messenger.owner.telegram ['5550002'] disagrees "
        "with spec.modules.switchboard.owner.telegram ['5550001'] (in Butler "
        "home/switchboard): configure the owner once, in spec.modules.switchboard.owner "
        "(the messenger reads it from there), and remove spec.modules.messenger.owner"
    )
    assert await cluster.owned("messenger", "Deployment") is None
