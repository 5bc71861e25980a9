"""Ready follows the Deployment's rollout (watched, not polled), with kstatus conditions."""

from __future__ import annotations

from typing import Any

from butlers_operator.render import CONFIG_HASH_ANNOTATION

from .conftest import BUTLERS_PATH, KINDS, NAMESPACE, Cluster, eventually, running_operator

# No resync during these tests: only the Deployment watch can bring status up to date.
NO_RESYNC = {"resync_seconds": 3600.0}


async def _status(cluster: Cluster, name: str, kind: str, value: str) -> dict[str, Any] | None:
    condition = await cluster.condition(name, kind)
    return condition if condition.get("status") == value else None


async def test_ready_only_when_the_current_template_is_rolled_out(
    cluster: Cluster,
    make_settings: Any,
) -> None:
    async with running_operator(make_settings(**NO_RESYNC)):
        await cluster.create_butler("health")
        await eventually(lambda: cluster.owned("health", "Deployment"), "the Deployment")
        await eventually(lambda: _status(cluster, "health", "DatabaseReady", "True"), "database")
        ready = await cluster.condition("health", "Ready")
        assert ready["status"] == "False" and ready["reason"] == "RolloutInProgress"
        assert (await cluster.condition("health", "Reconciling"))["status"] == "True"

        # The Deployment controller saw generation 1, and the pod is ready.
        await cluster.report_rollout("health", generation=1, observed=1)
        await eventually(lambda: _status(cluster, "health", "Ready", "True"), "Ready=True")
        assert (await cluster.condition("health", "Reconciling"))["status"] == "False"
        assert (await cluster.condition("health", "Stalled"))["status"] == "False"
        assert (await cluster.butler("health") or {})["status"]["phase"] == "Ready"

        # A new template (generation 2) the controller has not seen: not Ready, even though
        # the old pod is still available.
        await cluster.report_rollout("health", generation=2, observed=1)
        pending = await eventually(
            lambda: _status(cluster, "health", "Ready", "False"), "Ready=False during rollout"
        )
        assert pending["reason"] == "RolloutPending"
        # Seen, but the new pod is not ready yet.
        await cluster.report_rollout("health", generation=2, observed=2, ready=False)
        await eventually(
            lambda: _status(cluster, "health", "Available", "False"), "the new pod not ready"
        )
        await cluster.report_rollout("health", generation=2, observed=2)
        await eventually(lambda: _status(cluster, "health", "Ready", "True"), "Ready again")


async def test_a_rollout_past_its_deadline_is_stalled(cluster: Cluster, make_settings: Any) -> None:
    deadline = {
        "conditions": [
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": 'ReplicaSet "health-7d9" has timed out progressing.',
            }
        ]
    }
    async with running_operator(make_settings(**NO_RESYNC)):
        await cluster.create_butler("health")
        await eventually(lambda: _status(cluster, "health", "DatabaseReady", "True"), "database")
        await cluster.report_rollout("health", generation=1, observed=1, ready=False, **deadline)
        stalled = await eventually(
            lambda: _status(cluster, "health", "Stalled", "True"), "Stalled=True"
        )
    assert stalled["reason"] == "ProgressDeadlineExceeded"
    assert "timed out progressing" in stalled["message"]
    assert (await cluster.butler("health") or {})["status"]["phase"] == "Failed"


async def test_a_switchboard_added_later_reaches_every_butler_at_once(
    cluster: Cluster, make_settings: Any
) -> None:
    def switchboard_url(deployment: dict[str, Any] | None) -> str | None:
        containers = (deployment or {}).get("spec", {}).get("template", {}).get("spec", {})
        env = (containers.get("containers") or [{}])[0].get("env") or []
        return next((e["value"] for e in env if e["name"] == "BUTLERS_SWITCHBOARD_URL"), None)

    async with running_operator(make_settings(**NO_RESYNC)):
        await cluster.create_butler("health")
        first = await eventually(lambda: cluster.owned("health", "Deployment"), "the Deployment")
        assert switchboard_url(first) is None
        await cluster.create_butler("router", roster="switchboard", port=40100)

        async def rendered_url() -> str | None:
            return switchboard_url(await cluster.owned("health", "Deployment"))

        url = await eventually(rendered_url, "health's Deployment to name the switchboard")
        assert url == f"http://router.{NAMESPACE}.svc:40100/mcp"
        # Its pod template changed, so the pod rolls and registers.
        after = await cluster.owned("health", "Deployment") or {}
        annotations = after["spec"]["template"]["metadata"]["annotations"]
        assert annotations[CONFIG_HASH_ANNOTATION]

        # The switchboard goes: the others stop naming it.
        await cluster.delete(f"{BUTLERS_PATH}/router")

        async def dropped() -> bool:
            return await rendered_url() is None

        await eventually(dropped, "the switchboard URL to go")


async def test_the_operator_writes_no_status_when_nothing_changed(
    cluster: Cluster, make_settings: Any, kmock: Any
) -> None:
    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler("health")
        await eventually(lambda: _status(cluster, "health", "DatabaseReady", "True"), "database")
        await cluster.report_rollout("health", generation=1, observed=1)
        await eventually(lambda: _status(cluster, "health", "Ready", "True"), "Ready")

        def ours() -> int:  # status writes of the operator (kopf's own bookkeeping aside)
            patches = kmock[f"patch {BUTLERS_PATH}/health/status"]
            return sum(1 for r in patches if set(r.data.get("status") or {}) - {"kopf"})

        deployment_path = KINDS["Deployment"].format(ns=NAMESPACE, name="health")
        writes = ours(), len(kmock[f"patch {deployment_path}"])
        resyncs = len(kmock[f"get {BUTLERS_PATH}"])
        await eventually(lambda: len(kmock[f"get {BUTLERS_PATH}"]) >= resyncs + 3, "3 resyncs")
        after = ours(), len(kmock[f"patch {deployment_path}"])
        assert after == writes


async def test_pods_the_cluster_refuses_to_create_are_stalled_with_its_reason(
    cluster: Cluster, make_settings: Any
) -> None:
    """A ResourceQuota on limits.cpu rejects the pod: the status says so, not "in progress"."""
    refused = {
        "replicas": 0,
        "updatedReplicas": 0,
        "conditions": [
            {
                "type": "ReplicaFailure",
                "status": "True",
                "reason": "FailedCreate",
                "message": 'pods "health-7d9-x" is forbidden: failed quota: compute: '
                "must specify limits.cpu for: butler,migrate",
            }
        ],
    }
    async with running_operator(make_settings(**NO_RESYNC)):
        await cluster.create_butler("health")
        await eventually(lambda: _status(cluster, "health", "DatabaseReady", "True"), "database")
        await cluster.report_rollout("health", generation=1, observed=1, ready=False, **refused)
        stalled = await eventually(
            lambda: _status(cluster, "health", "Stalled", "True"), "Stalled=True"
        )
    assert stalled["reason"] == "FailedCreate"
    assert "must specify limits.cpu" in stalled["message"]
    ready = await cluster.condition("health", "Ready")
    assert ready["reason"] == "FailedCreate"


async def test_a_crash_looping_container_is_the_reason_given(
    cluster: Cluster, make_settings: Any, kmock: Any
) -> None:
    kmock.resources["v1/pods"] = __import__("kmock").ResourceInfo(kind="Pod", namespaced=True)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "health-7d9-abcde",
            "namespace": NAMESPACE,
            "resourceVersion": "1",
            "labels": {"app.kubernetes.io/name": "butler", "butlers.dev/butler": "health"},
        },
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "migrate",
                    "ready": False,
                    "restartCount": 4,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": "back-off 1m20s restarting failed container=migrate",
                        }
                    },
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                }
            ],
        },
    }
    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler("health")
        await eventually(lambda: _status(cluster, "health", "DatabaseReady", "True"), "database")
        async with cluster.session.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod) as resp:
            assert resp.status < 300, await resp.text()
        await cluster.report_rollout("health", generation=1, observed=1, ready=False)

        async def crashing() -> dict[str, Any] | None:
            ready = await cluster.condition("health", "Ready")
            return ready if ready.get("reason") == "CrashLoopBackOff" else None

        ready = await eventually(crashing, "Ready's reason to be CrashLoopBackOff")
    assert "init container migrate of pod health-7d9-abcde" in ready["message"]
    assert "exit code 1" in ready["message"]


async def test_a_container_the_memory_limit_killed_is_counted_with_its_reason(
    cluster: Cluster, make_settings: Any, kmock: Any
) -> None:
    """Restarted and Ready again: the status still says it restarted, and why."""
    kmock.resources["v1/pods"] = __import__("kmock").ResourceInfo(kind="Pod", namespaced=True)
    ended = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T10:00:00Z"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "health-7d9-fghij",
            "namespace": NAMESPACE,
            "resourceVersion": "1",
            "labels": {"app.kubernetes.io/name": "butler", "butlers.dev/butler": "health"},
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "butler",
                    "ready": True,
                    "restartCount": 1,
                    "state": {"running": {"startedAt": "2026-01-01T10:00:01Z"}},
                    "lastState": {"terminated": ended},
                }
            ],
        },
    }
    async with running_operator(make_settings(**NO_RESYNC)):
        await cluster.create_butler("health")
        await eventually(lambda: _status(cluster, "health", "DatabaseReady", "True"), "database")
        async with cluster.session.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod) as resp:
            assert resp.status < 300, await resp.text()
        await cluster.report_rollout("health", generation=1, observed=1)

        async def restarted() -> dict[str, Any] | None:
            status = (await cluster.butler("health") or {}).get("status") or {}
            return status if status.get("ready") and status.get("restarts") == 1 else None

        status = await eventually(restarted, "Ready with one restart")
    assert status["lastRestart"] == {
        "pod": "health-7d9-fghij",
        "container": "butler",
        "reason": "OOMKilled",
        "exitCode": 137,
        "finishedAt": "2026-01-01T10:00:00Z",
    }
