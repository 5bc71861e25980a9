"""The process kubelet against the real control plane: what real controllers see of it.

Workloads are Deployments, Jobs and Pods of `tests/kube/testserver.py` on the
`python` image; every expectation is read back through the API (Deployment
status from the deployment controller, EndpointSlices from the endpointslice
controller, garbage collection by the garbage collector).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.kube.api import ApiError, KubeApi, build_path
from tests.kube.cluster import KubeCluster
from tests.kube.images import IMAGE_PATHS
from tests.kube.wait import condition_status, wait_deployment_available, wait_until

SERVER = str(Path(__file__).resolve().parents[2] / "kube" / "testserver.py")
LABELS = {"app": "web"}


def container(name: str = "web", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "python:3.11",
        "command": ["python3", SERVER],
        "ports": [{"name": "http", "containerPort": 8080}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        # Without a readiness probe a pod is Ready before it listens (as anywhere).
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
        **extra,
    }


def deployment(
    name: str, template_spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    labels = labels or {"app": name}
    volumes = template_spec.pop("volumes", [])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"volumes": [{"name": "tmp", "emptyDir": {}}, *volumes], **template_spec},
            },
        },
    }


def service(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": labels or {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    }


async def create(kube: KubeApi, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    plural = {"Deployment": "deployments", "Job": "jobs"}.get(obj["kind"])
    group = "batch/v1" if obj["kind"] == "Job" else "apps/v1" if plural else "v1"
    plural = (
        plural
        or {"Service": "services", "ConfigMap": "configmaps", "Secret": "secrets", "Pod": "pods"}[
            obj["kind"]
        ]
    )
    return await kube.create(build_path(group, plural, namespace), obj)


async def pods(kube: KubeApi, namespace: str, **params: Any) -> list[dict[str, Any]]:
    return await kube.list(build_path("v1", "pods", namespace), **params)


async def get_text(address: str, path: str) -> tuple[int, str]:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(f"http://{address}{path}")
        return response.status_code, response.text


async def serves(address: str, path: str, expected: str) -> bool:
    try:
        return await get_text(address, path) == (200, expected)
    except httpx.HTTPError:
        return False


def pid_of(pod: dict[str, Any], container_name: str = "web") -> int:
    [status] = [s for s in pod["status"]["containerStatuses"] if s["name"] == container_name]
    return int(status["containerID"].removeprefix("process://"))


def scratch_file(name: str, hidden: tuple[str, ...] = ("/tmp",)) -> Path:
    """A host path a pod's container sees as the host's own, writable file system: not
    under a volume it mounts (`hidden`: its /tmp is an emptyDir) nor under the paths
    that stand for its image (the venv and the checkout, mounted back read-only when a
    volume hides them), wherever the checkout lives (CI's clone may be under /tmp)."""
    taken = [Path(p) for p in (*hidden, *IMAGE_PATHS)]
    candidates = (Path.home() / ".cache" / "butlers" / "scratch", Path("/var/tmp/butlers-scratch"))
    for candidate in candidates:
        resolved = candidate.resolve()
        if any(resolved == t or t in resolved.parents for t in taken):
            continue
        try:
            resolved.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        return resolved / name
    pytest.skip(f"no writable folder outside {[str(t) for t in taken]} for the pod to write to")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_a_deployment_becomes_available_and_serves_through_its_service(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    await create(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg"},
            "data": {"greeting": "hello", "app.conf": "x=1"},
        },
    )
    await create(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "stringData": {"token": "s3cret"},
        },
    )
    web = container(
        env=[
            {
                "name": "GREETING",
                "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}},
            },
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        volumeMounts=[
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "cfg", "mountPath": "/etc/web", "readOnly": True},
            {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
        ],
        readinessProbe={"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
    )
    spec = {
        "containers": [web],
        "automountServiceAccountToken": False,
        "volumes": [
            {"name": "cfg", "configMap": {"name": "cfg"}},
            {"name": "creds", "secret": {"secretName": "creds"}},
        ],
    }
    await create(kube, namespace, service("web"))
    await create(kube, namespace, deployment("web", spec))
    await wait_deployment_available(kube, namespace, "web")

    address = await kube_cluster.wait_service(namespace, "web", "http")
    [pod] = await pods(kube, namespace)
    assert await get_text(address, "/env/GREETING") == (200, "hello")
    assert await get_text(address, "/env/TOKEN") == (200, "s3cret")
    assert await get_text(address, "/env/POD_NAME") == (200, pod["metadata"]["name"])
    assert await get_text(address, "/file/etc/web/app.conf") == (200, "x=1")
    assert await get_text(address, "/file/etc/creds/token") == (200, "s3cret")
    status = pod["status"]
    assert status["phase"] == "Running" and status["podIP"].startswith("10.244.")
    assert condition_status(pod, "Ready") == "True"
    [web_status] = status["containerStatuses"]
    assert (
        web_status["ready"] and "running" in web_status["state"] and web_status["restartCount"] == 0
    )


async def test_a_deleted_pod_is_replaced_and_its_processes_are_killed(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    await create(kube, namespace, service("web"))
    await create(kube, namespace, deployment("web", {"containers": [container()]}))
    await wait_deployment_available(kube, namespace, "web")
    [old] = await pods(kube, namespace)
    pid = pid_of(old)
    assert alive(pid)

    await kube.delete(build_path("v1", "pods", namespace, old["metadata"]["name"]))

    await wait_until(lambda: not alive(pid), f"process {pid} of the deleted pod to exit", 40)

    async def replacement() -> dict[str, Any] | None:
        current = [
            p
            for p in await pods(kube, namespace)
            if p["metadata"]["name"] != old["metadata"]["name"]
        ]
        return next((p for p in current if condition_status(p, "Ready") == "True"), None)

    new = await wait_until(replacement, "a Ready replacement pod", 40)
    assert new["metadata"]["ownerReferences"] == old["metadata"]["ownerReferences"]
    await wait_until(
        lambda: serves(kube_cluster.service_address(namespace, "web"), "/healthz", "ok"),
        "the Service to answer from the new pod",
    )


async def test_deleting_a_deployment_garbage_collects_its_replicaset_and_pods(
    kube: KubeApi, namespace: str
) -> None:
    await create(kube, namespace, deployment("web", {"containers": [container()]}))
    await wait_deployment_available(kube, namespace, "web")
    [pod] = await pods(kube, namespace)
    pid = pid_of(pod)

    await kube.delete(
        build_path("apps/v1", "deployments", namespace, "web"), {"propagationPolicy": "Background"}
    )

    async def all_gone() -> bool:
        sets = await kube.list(build_path("apps/v1", "replicasets", namespace))
        return not sets and not await pods(kube, namespace)

    await wait_until(all_gone, "the garbage collector to delete the ReplicaSet and its pod", 40)
    assert not alive(pid)


async def test_init_containers_run_to_completion_first_and_share_the_pods_volumes(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    seed = {
        "name": "seed",
        "image": "python:3.11",
        "command": ["python3", "-c", "open('/srv/seed', 'w').write('seeded')"],
        "volumeMounts": [{"name": "work", "mountPath": "/srv"}],
    }
    web = container(
        volumeMounts=[{"name": "tmp", "mountPath": "/tmp"}, {"name": "work", "mountPath": "/srv"}]
    )
    spec = {
        "initContainers": [seed],
        "containers": [web],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }
    await create(kube, namespace, service("web"))
    await create(kube, namespace, deployment("web", spec))
    await wait_deployment_available(kube, namespace, "web")

    address = await kube_cluster.wait_service(namespace, "web", "http")
    assert await get_text(address, "/file/srv/seed") == (200, "seeded")
    [pod] = await pods(kube, namespace)
    [init] = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0
    assert init["state"]["terminated"]["reason"] == "Completed"
    assert condition_status(pod, "Initialized") == "True"


async def test_a_failing_liveness_probe_restarts_the_container(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    probe = {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    spec = {"containers": [container(livenessProbe=probe)], "terminationGracePeriodSeconds": 2}
    await create(kube, namespace, service("web"))
    await create(kube, namespace, deployment("web", spec))
    await wait_deployment_available(kube, namespace, "web")
    address = await kube_cluster.wait_service(namespace, "web", "http")
    async with httpx.AsyncClient() as client:
        assert (await client.post(f"http://{address}/sick")).status_code == 200

    async def restarted() -> dict[str, Any] | None:
        [pod] = await pods(kube, namespace)
        [status] = pod["status"]["containerStatuses"]
        return status if status["restartCount"] == 1 and "running" in status["state"] else None

    status = await wait_until(restarted, "the kubelet to restart the unhealthy container", 40)
    assert "terminated" in status["lastState"]
    # The new process starts healthy: the restart count stays at one.
    await wait_until(lambda: serves(address, "/healthz", "ok"), "the restarted container to serve")
    [pod] = await pods(kube, namespace)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1


async def test_readiness_decides_the_services_endpoints_and_the_deployments_availability(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    probe = {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 1}
    await create(kube, namespace, service("web"))
    await create(
        kube, namespace, deployment("web", {"containers": [container(readinessProbe=probe)]})
    )

    async def running_pod() -> dict[str, Any] | None:
        found = await pods(kube, namespace)
        return found[0] if found and found[0]["status"].get("phase") == "Running" else None

    pod = await wait_until(running_pod, "the pod to run")
    local = kube_cluster.kubelet.local_port(pod["metadata"]["uid"], 8080)
    assert local is not None
    address = kube_cluster.service_address(namespace, "web")
    # Running but not ready: no endpoint is Ready, the Service answers nothing.
    assert not await serves(address, "/healthz", "ok")
    [d] = await kube.list(build_path("apps/v1", "deployments", namespace))
    assert not (d.get("status") or {}).get("availableReplicas")

    # Running is the process started, not yet listening: wait until it answers itself.
    await wait_until(
        lambda: serves(f"127.0.0.1:{local}", "/healthz", "ok"), "the container to listen"
    )
    async with httpx.AsyncClient() as client:
        assert (await client.post(f"http://127.0.0.1:{local}/ready")).status_code == 200
    await wait_deployment_available(kube, namespace, "web")

    async def ready_endpoint() -> bool:
        slices = await kube.list(build_path("discovery.k8s.io/v1", "endpointslices", namespace))
        return any(
            (e.get("conditions") or {}).get("ready")
            for s in slices
            for e in s.get("endpoints") or []
        )

    await wait_until(ready_endpoint, "a Ready endpoint in the Service's EndpointSlice")
    await wait_until(lambda: serves(address, "/healthz", "ok"), "the Service to answer")


async def test_the_projected_token_authenticates_the_pod_as_its_service_account(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    # The ServiceAccount admission plugin adds the kube-api-access projected volume.
    await create(kube, namespace, service("web"))
    await create(kube, namespace, deployment("web", {"containers": [container()]}))
    await wait_deployment_available(kube, namespace, "web")
    [pod] = await pods(kube, namespace)
    assert any("projected" in v for v in pod["spec"]["volumes"])

    code, who = await get_text(await kube_cluster.wait_service(namespace, "web", "http"), "/whoami")
    assert (code, who) == (200, f"system:serviceaccount:{namespace}:default")


async def test_a_service_named_in_env_by_its_cluster_dns_name_is_reached(
    kube: KubeApi, kube_cluster: KubeCluster, namespace: str
) -> None:
    greeting = container(env=[{"name": "GREETING", "value": "hello from web"}])
    upstream = f"http://web.{namespace}.svc.cluster.local:80/env/GREETING"
    client = container(env=[{"name": "UPSTREAM", "value": upstream}])
    for name, spec in (("web", greeting), ("client", client)):
        await create(kube, namespace, service(name))
        await create(kube, namespace, deployment(name, {"containers": [spec]}))
    for name in ("web", "client"):
        await wait_deployment_available(kube, namespace, name)
        await kube_cluster.wait_service(namespace, name, "http")

    address = kube_cluster.service_address(namespace, "client")
    assert await get_text(address, "/fetch/UPSTREAM") == (200, "hello from web")


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only-root", "writable-root"])
async def test_read_only_root_filesystem_refuses_writes_outside_the_volumes(
    kube: KubeApi, namespace: str, read_only: bool
) -> None:
    target = scratch_file(f"written-by-pod-{namespace}")
    script = (
        "import sys\n"
        "open('/tmp/ok', 'w').write('x')\n"  # the emptyDir is writable either way
        f"try:\n    open({str(target)!r}, 'w').write('x')\nexcept OSError:\n    sys.exit(3)\n"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "writer"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "writer",
                    "image": "python:3.11",
                    "command": ["python3", "-c", script],
                    "securityContext": {"readOnlyRootFilesystem": read_only},
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }
    await create(kube, namespace, pod)

    async def finished() -> dict[str, Any] | None:
        found = await kube.find(build_path("v1", "pods", namespace, "writer"))
        return (
            found
            if (found or {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
            else None
        )

    done = await wait_until(finished, "the writer pod to finish")
    [status] = done["status"]["containerStatuses"]
    if read_only:
        assert done["status"]["phase"] == "Failed"
        assert status["state"]["terminated"]["exitCode"] == 3
        assert not target.exists()
    else:
        assert done["status"]["phase"] == "Succeeded"
        assert target.read_text() == "x"
        target.unlink()


async def test_a_job_runs_its_pod_to_completion(kube: KubeApi, namespace: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "once",
                            "image": "python:3.11",
                            "command": ["python3", "-c", "print('done')"],
                        }
                    ],
                }
            },
        },
    }
    await create(kube, namespace, job)

    async def complete() -> dict[str, Any] | None:
        found = await kube.find(build_path("batch/v1", "jobs", namespace, "once"))
        return found if condition_status(found, "Complete") == "True" else None

    done = await wait_until(complete, "the Job to complete")
    assert done["status"]["succeeded"] == 1
    [pod] = await pods(kube, namespace, labelSelector="job-name=once")
    assert pod["status"]["phase"] == "Succeeded"


async def test_container_logs_are_read_through_the_api_server(
    kube: KubeApi, namespace: str
) -> None:
    """`pods/log` (kubectl logs): the API server calls the kubelet over mutual TLS."""
    talk = "import time\nfor i in range(5): print(f'line {i}', flush=True)\ntime.sleep(600)"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "talker"},
        "spec": {
            "containers": [
                {"name": "talk", "image": "python:3.11", "command": ["python3", "-c", talk]}
            ],
            "terminationGracePeriodSeconds": 1,
        },
    }
    await create(kube, namespace, pod)
    path = build_path("v1", "pods", namespace, "talker", "log")

    async def spoken() -> bool:
        try:
            return "line 4" in await kube.text(path)
        except ApiError as exc:  # 400 while the container is waiting to start
            assert exc.status == 400, exc
            return False

    await wait_until(spoken, "the pod's five lines in its log", 30)
    assert await kube.text(path, container="talk") == "".join(f"line {i}\n" for i in range(5))
    assert await kube.text(path, tailLines=2) == "line 3\nline 4\n"
    assert await kube.text(path, tailLines=2, limitBytes=8) == "line 3\nl"
    with pytest.raises(ApiError) as refused:
        await kube.text(path, sinceSeconds=60)
    assert refused.value.status == 400 and "not supported" in refused.value.message
    with pytest.raises(ApiError) as unknown:
        await kube.text(path, container="nobody")
    assert unknown.value.status == 400 and "nobody" in unknown.value.message
