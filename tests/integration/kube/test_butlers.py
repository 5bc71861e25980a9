"""What only a real API server shows about Butlers and the operator.

The CRD's own validation as `kubectl apply` reports it, garbage collection of a
Butler's children, reclaim policies, rollouts seen through the Deployment
controller, pod replacement, an operator restarted mid-reconcile, two
namespaces with the same Butler name, and the operator's RBAC compared with
what it actually does (the API server's audit log). The operator runs as a pod
of the chart, under its own ServiceAccount, on the session's PostgreSQL.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Mapping
from typing import Any

import asyncpg
import pytest
import yaml
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from butlers_operator.auth import NAMESPACE_SECRET, USER_TOKEN_KEY
from tests.e2e.harness import userpath
from tests.kube.api import KubeApi, build_path
from tests.kube.cluster import KubeCluster
from tests.kube.wait import condition_status, wait_deployment_available, wait_until

from .conftest import OperatorRelease

BUTLERS = "butlers.dev/v1alpha1"
CHILDREN = (
    ("v1", "secrets", "{name}-db"),
    ("v1", "configmaps", "{name}-spec"),
    ("v1", "serviceaccounts", "{name}"),
    ("v1", "services", "{name}"),
    ("apps/v1", "deployments", "{name}"),
    ("networking.k8s.io/v1", "networkpolicies", "{name}"),
)
READY_TIMEOUT = 90.0


def butler(name: str, port: int = 41000, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": BUTLERS,
        "kind": "Butler",
        "metadata": {"name": name},
        "spec": {"description": f"the {name} butler", "port": port, **spec},
    }


async def kubectl(
    cluster: userpath.Cluster, *args: str, stdin: str | None = None
) -> tuple[int, str]:
    """(exit code, stdout + stderr) of kubectl, as a user sees it."""
    process = await asyncio.create_subprocess_exec(
        *userpath.build_kubectl(cluster, *args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(stdin.encode() if stdin else None), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def apply(cluster: userpath.Cluster, *documents: Mapping[str, Any]) -> None:
    code, out = await kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
    assert code == 0, out


async def get_butler(kube: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    return await kube.find(build_path(BUTLERS, "butlers", namespace, name))


async def wait_ready(kube: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        body = await get_butler(kube, namespace, name)
        return body if condition_status(body, "Ready") == "True" else None

    async def describe() -> Any:
        return ((await get_butler(kube, namespace, name)) or {}).get("status")

    return await wait_until(ready, f"Butler {namespace}/{name} Ready", READY_TIMEOUT, describe)


async def call(kube_cluster: KubeCluster, namespace: str, name: str, tool: str, **args: Any) -> Any:
    """`tool` over MCP with the user's token (from the namespace's auth Secret)."""
    address = await kube_cluster.wait_service(namespace, name, "mcp")
    secret = await kube_cluster.api().get(build_path("v1", "secrets", namespace, NAMESPACE_SECRET))
    token = base64.b64decode(secret["data"][USER_TOKEN_KEY]).decode()
    headers = {"Authorization": f"Bearer {token}"}
    async with Client(StreamableHttpTransport(f"http://{address}/mcp", headers=headers)) as client:
        return (await client.call_tool(tool, args)).data


async def schema_exists(admin_dsn: str, schema: str) -> bool:
    connection = await asyncpg.connect(admin_dsn)
    try:
        return bool(
            await connection.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema)
        )
    finally:
        await connection.close()


async def pods_of(kube: KubeApi, namespace: str, name: str) -> list[dict[str, Any]]:
    return await kube.list(
        build_path("v1", "pods", namespace), labelSelector=f"butlers.dev/butler={name}"
    )


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (butler("b" * 40), "32 characters"),
        (butler("9lives"), "metadata.name must match"),
        (
            butler(
                "clock",
                schedules=[{"name": "tick", "cron": "* * * * *", "prompt": "p", "job": "j"}],
            ),
            "a schedule needs exactly one of 'prompt' or 'job'",
        ),
        (butler("nosy", colour="blue"), 'unknown field "spec.colour"'),
        (butler("low", port=80), "spec.port: Invalid value: 80"),
    ],
    ids=["name-too-long", "name-not-a-butler-name", "prompt-and-job", "unknown-field", "port"],
)
async def test_an_invalid_butler_is_refused_by_the_api_server_with_a_clear_message(
    kube_cluster: KubeCluster,
    namespace: str,
    butler_crds: None,
    manifest: dict[str, Any],
    message: str,
) -> None:
    cluster = userpath.Cluster(namespace, kube_cluster.kubeconfig)
    code, out = await kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert code != 0, out
    assert message in out
    code, listed = await kubectl(cluster, "get", "butlers", "-o", "name")
    assert code == 0 and listed.strip() == ""


async def test_deleting_a_butler_garbage_collects_everything_it_owns(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    await apply(operator.cluster, butler("notes"))
    await wait_ready(kube, namespace, "notes")
    [pod] = await pods_of(kube, namespace, "notes")
    for group, plural, name in CHILDREN:
        assert await kube.find(build_path(group, plural, namespace, name.format(name="notes")))

    code, out = await kubectl(
        operator.cluster, "delete", "butler", "notes", "--wait=true", "--timeout=60s"
    )
    assert code == 0, out

    async def orphans() -> list[str]:
        left = [
            f"{plural}/{name.format(name='notes')}"
            for group, plural, name in CHILDREN
            if await kube.find(build_path(group, plural, namespace, name.format(name="notes")))
        ]
        left += [f"pods/{p['metadata']['name']}" for p in await pods_of(kube, namespace, "notes")]
        return left

    await wait_until(lambda: _none(orphans), "the garbage collector to delete every child", 60)
    assert pod["metadata"]["name"] not in {
        p["metadata"]["name"] for p in await pods_of(kube, namespace, "notes")
    }


async def _none(check: Any) -> bool:
    return not await check()


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
async def test_the_reclaim_policy_keeps_or_drops_the_schema_and_its_data(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease, policy: str
) -> None:
    await apply(operator.cluster, butler("diary", database={"reclaimPolicy": policy}))
    body = await wait_ready(kube, namespace, "diary")
    schema = body["status"]["schema"]
    await call(kube_cluster, namespace, "diary", "state_set", key="entry", value={"day": 1})

    code, out = await kubectl(
        operator.cluster, "delete", "butler", "diary", "--wait=true", "--timeout=60s"
    )
    assert code == 0, out

    if policy == "Retain":
        connection = await asyncpg.connect(operator.admin_dsn)
        try:
            value = await connection.fetchval(
                f'SELECT value FROM "{schema}".state WHERE key = $1', "entry"
            )
        finally:
            await connection.close()
        assert json.loads(value) == {"day": 1}
    else:
        assert not await schema_exists(operator.admin_dsn, schema)


async def test_a_spec_change_rolls_exactly_one_new_pod_and_ready_follows_the_new_generation(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    await apply(operator.cluster, butler("notes", instructions="Be brief."))
    await wait_ready(kube, namespace, "notes")
    [old] = await pods_of(kube, namespace, "notes")
    states: list[tuple[int | None, str | None]] = []  # (observedGeneration, Ready) as seen
    pods_seen: set[str] = set()

    async def watch() -> None:
        while True:
            body = await get_butler(kube, namespace, "notes") or {}
            state = (
                (body.get("status") or {}).get("observedGeneration"),
                condition_status(body, "Ready"),
            )
            if not states or states[-1] != state:
                states.append(state)
            pods_seen.update(p["metadata"]["name"] for p in await pods_of(kube, namespace, "notes"))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    try:
        await apply(operator.cluster, butler("notes", instructions="Be thorough."))
        await wait_deployment_available(kube, namespace, "notes", READY_TIMEOUT)
        await wait_until(
            lambda: _generation_ready(kube, namespace, "notes", 2),
            "Ready for generation 2",
            READY_TIMEOUT,
        )
    finally:
        watcher.cancel()
    # While the new pod was not ready yet, the Butler was not Ready.
    assert (2, "False") in states, f"(observedGeneration, Ready) seen: {states}"
    first_false = states.index((2, "False"))
    assert (2, "True") not in states[:first_false], f"Ready during the rollout: {states}"
    new_pods = pods_seen - {old["metadata"]["name"]}
    assert len(new_pods) == 1, f"pods created by the rollout: {sorted(new_pods)}"


async def test_a_cpu_quota_stalls_the_butler_with_its_reason_until_the_spec_sets_limits(
    kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    """A ResourceQuota on limits.cpu refuses pods without a CPU limit (the migrate init
    container included): the Butler says so, and setting spec.resources admits the pod."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "compute", "namespace": namespace},
        "spec": {"hard": {"limits.cpu": "2"}},
    }
    await apply(operator.cluster, quota)
    try:
        await apply(operator.cluster, butler("metered"))

        async def stalled() -> dict[str, Any] | None:
            body = await get_butler(kube, namespace, "metered") or {}
            conditions = (body.get("status") or {}).get("conditions") or []
            found = next((c for c in conditions if c["type"] == "Stalled"), {})
            return found if found.get("status") == "True" else None

        condition = await wait_until(stalled, "Stalled by the quota", READY_TIMEOUT)
        assert condition["reason"] == "FailedCreate"
        assert "limits.cpu" in condition["message"]
        limits = {"requests": {"cpu": "50m"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
        await apply(operator.cluster, butler("metered", resources=limits))
        await wait_ready(kube, namespace, "metered")
    finally:
        code, out = await kubectl(operator.cluster, "delete", "resourcequota", "compute")
        assert code == 0, out


async def test_pod_overrides_taken_out_of_a_butler_leave_its_deployment(
    kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    overrides = {
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "labels": {"team": "home"},
        "annotations": {"example.com/note": "hello"},
    }
    path = build_path("apps/v1", "deployments", namespace, "tidy")

    async def template() -> dict[str, Any]:
        return ((await kube.find(path)) or {}).get("spec", {}).get("template", {})

    await apply(operator.cluster, butler("tidy", pod=overrides))

    async def overridden() -> bool:
        found = await template()
        return "tolerations" in found.get("spec", {}) and "team" in found["metadata"]["labels"]

    await wait_until(overridden, "the overrides on the Deployment", READY_TIMEOUT)
    await apply(operator.cluster, butler("tidy"))

    async def cleared() -> bool:
        found = await template()
        spec, meta = found.get("spec", {}), found.get("metadata", {})
        return not (
            {"tolerations", "priorityClassName"} & set(spec)
            or "team" in (meta.get("labels") or {})
            or "example.com/note" in (meta.get("annotations") or {})
        )

    await wait_until(cleared, "the overrides to leave the Deployment", READY_TIMEOUT)


async def test_a_deleted_pod_is_replaced_and_the_butler_serves_its_data_again(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    await apply(operator.cluster, butler("notes"))
    await wait_ready(kube, namespace, "notes")
    await call(kube_cluster, namespace, "notes", "state_set", key="list", value=["milk"])
    [old] = await pods_of(kube, namespace, "notes")

    await kube.delete(build_path("v1", "pods", namespace, old["metadata"]["name"]))

    async def replaced() -> bool:
        pods = [
            p
            for p in await pods_of(kube, namespace, "notes")
            if p["metadata"]["name"] != old["metadata"]["name"]
        ]
        return any(condition_status(p, "Ready") == "True" for p in pods)

    await wait_until(replaced, "a Ready replacement pod", READY_TIMEOUT)
    assert await call(kube_cluster, namespace, "notes", "state_get", key="list") == ["milk"]
    await wait_ready(kube, namespace, "notes")


async def test_an_operator_restarted_mid_reconcile_converges(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    names = ["alpha", "bravo", "charlie"]
    await apply(operator.cluster, *(butler(n, port=41000 + i) for i, n in enumerate(names)))
    # Kill the operator while it provisions and renders.
    [running] = await kube.list(
        build_path("v1", "pods", namespace), labelSelector="app.kubernetes.io/name=butlers-operator"
    )
    await kube.delete(
        build_path("v1", "pods", namespace, running["metadata"]["name"]), {"gracePeriodSeconds": 0}
    )

    for name in names:
        await wait_ready(kube, namespace, name)
        for group, plural, child in CHILDREN:
            assert await kube.find(build_path(group, plural, namespace, child.format(name=name)))
        assert len(await pods_of(kube, namespace, name)) == 1


@pytest.mark.second_namespace
async def test_two_namespaces_with_a_butler_of_the_same_name_keep_their_own_data(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    # One chart serving both namespaces (a Role in each): the fixture installed it so.
    other = operator.namespaces[1]
    second = userpath.Cluster(other, kube_cluster.kubeconfig)
    await apply(operator.cluster, butler("notes"))
    await apply(second, butler("notes"))
    first_body = await wait_ready(kube, namespace, "notes")
    second_body = await wait_ready(kube, other, "notes")
    assert first_body["status"]["schema"] != second_body["status"]["schema"]

    await call(kube_cluster, namespace, "notes", "state_set", key="owner", value=namespace)
    await call(kube_cluster, other, "notes", "state_set", key="owner", value=other)
    # Through more than one resync (5 s), each keeps reading its own: no shared schema,
    # no password reset locking either out.
    until = time.monotonic() + 7
    while time.monotonic() < until:
        assert await call(kube_cluster, namespace, "notes", "state_get", key="owner") == namespace
        assert await call(kube_cluster, other, "notes", "state_get", key="owner") == other
        await asyncio.sleep(0.5)


def audited(audit_log: str, user: str) -> list[dict[str, Any]]:
    return [
        e for line in audit_log.splitlines() if (e := json.loads(line))["user"]["username"] == user
    ]


def used_permissions(events: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource[/subresource], verb) of every request the API server allowed, and
    the checks admission made on the operator's behalf."""
    used = set()
    for event in events:
        ref = event.get("objectRef")
        if ref is None or event["responseStatus"]["code"] == 403:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
        if event["verb"] == "create" and ref["resource"] in {plural for _, plural, _ in CHILDREN}:
            # Owned objects carry blockOwnerDeletion: OwnerReferencesPermissionEnforcement
            # admits their creation only after checking `update` on the Butler's finalizers
            # (an authorization check, not a request of its own in the log).
            used.add(("butlers.dev", "butlers/finalizers", "update"))
    return used


def granted_permissions(role: Mapping[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


MANAGED_BY = "app.kubernetes.io/managed-by"


async def _drift_and_wait(kube: KubeApi, paths: list[str]) -> None:
    """Edit owned objects by hand (drop a label from each) and wait for the operator to put
    every one back. All at once: one resync pass corrects them all, as it would one."""
    for path in paths:
        await kube.patch(path, {"metadata": {"labels": {MANAGED_BY: None}}})

    async def drifted() -> list[str]:
        return [
            path
            for path in paths
            if MANAGED_BY
            not in (((await kube.find(path)) or {}).get("metadata", {}).get("labels") or {})
        ]

    await wait_until(
        lambda: _none(drifted), "the operator to correct every edited object", 30, drifted
    )


async def test_the_operators_role_grants_exactly_what_it_uses(
    kube_cluster: KubeCluster, kube: KubeApi, namespace: str, operator: OperatorRelease
) -> None:
    """Every verb of the chart's Role is used in a Butler's life, and none is missing: remove
    one and it is either refused (403 below) or found unused."""
    manifest = butler("notes", database={"reclaimPolicy": "Delete"})
    await apply(operator.cluster, manifest)
    await wait_ready(kube, namespace, "notes")
    # Drift: every owned object edited by hand is corrected; one deleted comes back.
    await _drift_and_wait(
        kube,
        [
            build_path(g, plural, namespace, name.format(name="notes"))
            for g, plural, name in CHILDREN
        ],
    )
    await kube.delete(build_path("v1", "configmaps", namespace, "notes-spec"))
    await wait_until(
        lambda: kube.find(build_path("v1", "configmaps", namespace, "notes-spec")),
        "the ConfigMap to come back",
        30,
    )
    # A spec change rolls the pod.
    manifest["spec"]["instructions"] = "changed"
    await apply(operator.cluster, manifest)
    await wait_until(
        lambda: _generation_ready(kube, namespace, "notes", 2),
        "Ready for generation 2",
        READY_TIMEOUT,
    )
    # NetworkPolicies turned off in the chart: the operator removes them.
    await userpath.install_operator(
        operator.cluster,
        {
            "database": {
                "adminSecret": {"name": "butlers-admin"},
                "schemaPrefix": operator.schema_prefix,
            },
            "resyncSeconds": 5,
            "networkPolicy": {"enabled": False},
            "dashboard": {"enabled": False},
        },
    )
    await wait_until(
        lambda: _none(
            lambda: kube.find(
                build_path("networking.k8s.io/v1", "networkpolicies", namespace, "notes")
            )
        ),
        "the operator to delete the NetworkPolicy",
        60,
    )
    # Deleted with reclaimPolicy Delete: the finalizer drops the schema.
    code, out = await kubectl(
        operator.cluster, "delete", "butler", "notes", "--wait=true", "--timeout=60s"
    )
    assert code == 0, out

    audit_log = await asyncio.to_thread(kube_cluster.plane.audit_log.read_text)
    events = audited(audit_log, operator.account)
    refused = sorted(
        {(e["verb"], e["requestURI"]) for e in events if e["responseStatus"]["code"] == 403}
    )
    assert not refused, f"the operator was refused: {refused}"
    role = await kube.get(
        build_path(
            "rbac.authorization.k8s.io/v1", "roles", namespace, f"{userpath.RELEASE}-operator"
        )
    )
    unused = granted_permissions(role) - used_permissions(events)
    assert not unused, f"granted but never used in a Butler's life: {sorted(unused)}"


async def _generation_ready(kube: KubeApi, namespace: str, name: str, generation: int) -> bool:
    body = await get_butler(kube, namespace, name) or {}
    observed = (body.get("status") or {}).get("observedGeneration")
    return observed == generation and condition_status(body, "Ready") == "True"
