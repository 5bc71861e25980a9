"""The kind backend's commands and its one skip reason, without Docker or a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import kind_commands as k

TARGET = k.KindTarget(namespace="butlers-e2e-abc123")
ROOT = Path("/repo")


def test_without_docker_or_kind_the_reason_names_what_is_missing() -> None:
    present = {"docker", "kubectl"}
    reason = k.kind_unavailable_reason(
        which=lambda b: f"/usr/bin/{b}" if b in present else None, engine_answers=lambda: True
    )
    assert reason is not None and reason.endswith(": kind not found")
    assert reason.startswith("kind backend needs a running Docker engine")


def test_a_docker_binary_without_an_engine_is_a_reason_too() -> None:
    reason = k.kind_unavailable_reason(which=lambda b: f"/bin/{b}", engine_answers=lambda: False)
    assert reason is not None and "does not answer" in reason


def test_with_everything_present_there_is_no_reason() -> None:
    assert k.kind_unavailable_reason(which=lambda b: b, engine_answers=lambda: True) is None


def test_each_session_gets_its_own_namespace_name() -> None:
    assert k.build_namespace("abc123") == "butlers-e2e-abc123"


def test_the_cluster_comes_from_kind_config() -> None:
    argv = k.build_create_cluster(ROOT / "kind-config.yaml")
    assert argv[:3] == ["kind", "create", "cluster"]
    assert argv[argv.index("--config") + 1] == "/repo/kind-config.yaml"
    assert argv[argv.index("--name") + 1] == "butlers"


def test_both_images_are_built_and_loaded_under_the_chart_tags() -> None:
    [build] = k.build_image_builds(ROOT, TARGET)
    assert build[1:3] == ["-m", "images.build"]
    registry, tag = build[build.index("--registry") + 1], build[build.index("--tag") + 1]
    tags = [f"{registry}/{name}:{tag}" for name in build[-2:]]
    assert tags == ["ghcr.io/butlers-dev/butler:0.1.0", "ghcr.io/butlers-dev/operator:0.1.0"]
    load = k.build_kind_load(TARGET)
    assert load[:3] == ["kind", "load", "docker-image"] and load[-3:-1] == tags
    # The chart's PostgreSQL too: a kind node pulls nothing itself.
    assert load[-1] == k.POSTGRES_IMAGE


def test_helm_installs_into_the_session_namespace_and_waits() -> None:
    argv = k.build_helm_install(ROOT / "charts/butlers", Path("/tmp/v.yaml"), TARGET)
    assert argv[:4] == ["helm", "upgrade", "--install", "butlers"]
    assert argv[argv.index("--namespace") + 1] == "butlers-e2e-abc123"
    assert argv[argv.index("--kube-context") + 1] == "kind-butlers"
    assert "--wait" in argv


def test_chart_values_give_the_session_its_prefix_database_and_env_secret() -> None:
    values = k.build_chart_values(TARGET, "e2e_tabc123_", "pw")
    assert values["database"]["schemaPrefix"] == "e2e_tabc123_"
    assert values["postgres"] == {"enabled": True, "password": "pw"}
    assert values["butlerEnvSecret"] == k.ENV_SECRET
    assert values["butlerImage"] == {"repository": "ghcr.io/butlers-dev/butler", "tag": "0.1.0"}


def test_kubectl_commands_target_the_context_and_namespace() -> None:
    reused = k.KindTarget(namespace="ns1", context="my-cluster")
    assert k.build_wait_ready(reused)[:5] == [
        "kubectl",
        "--context",
        "my-cluster",
        "--namespace",
        "ns1",
    ]
    assert "--for=condition=Ready" in k.build_wait_ready(reused)
    assert k.build_port_forward(reused, "general", 50001, 40101)[-2:] == [
        "service/general",
        "50001:40101",
    ]
    delete = k.build_delete_namespace(reused)
    assert "--namespace" not in delete and delete[3:6] == ["delete", "namespace", "ns1"]
    assert "--ignore-not-found" in delete
    assert "--timeout=120s" in delete  # never the 15-minute default wait


def test_roster_files_only_get_a_namespace() -> None:
    doc = {"apiVersion": "butlers.dev/v1alpha1", "kind": "Butler",
           "metadata": {"name": "general", "labels": {"a": "b"}}, "spec": {"port": 1}}  # fmt: skip
    (out,) = k.with_namespace([doc], "ns1")
    assert out["metadata"] == {"name": "general", "labels": {"a": "b"}, "namespace": "ns1"}
    assert out["spec"] == doc["spec"] and "namespace" not in doc["metadata"]


def test_in_cluster_addresses_are_rewritten_to_port_forwards() -> None:
    dsn = "postgresql://general:pw@butlers-postgres.ns.svc:5432/butlers?sslmode=disable"
    assert (
        k.rewrite_host(dsn, "127.0.0.1", 55432)
        == "postgresql://general:pw@127.0.0.1:55432/butlers?sslmode=disable"
    )
    assert k.rewrite_host("http://127.0.0.1:41000", "172.18.0.1") == "http://172.18.0.1:41000"


def test_a_kube_context_names_the_kind_cluster_images_are_loaded_into() -> None:
    target = k.KindTarget.for_context("ns1", "kind-other")
    assert (target.context, target.cluster) == ("kind-other", "other")
    assert k.build_kind_load(target)[4] == "other"
    assert k.KindTarget.for_context("ns1", None).cluster == "butlers"
    with pytest.raises(k.KindCommandError, match="not a kind cluster"):
        k.KindTarget.for_context("ns1", "gke_project_zone_prod")


def test_the_ipv4_gateway_is_picked_and_its_absence_is_clear() -> None:
    dual = json.dumps(
        [
            {"Subnet": "fc00:f853::/64", "Gateway": "fc00:f853::1"},
            {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"},
        ]
    )
    assert k.pick_ipv4_gateway(dual) == "172.18.0.1"
    with pytest.raises(k.KindCommandError, match="no IPv4 gateway"):
        k.pick_ipv4_gateway('[{"Subnet":"fc00:f853::/64","Gateway":"fc00:f853::1"}]')
    with pytest.raises(k.KindCommandError, match="no IPv4 gateway"):
        k.pick_ipv4_gateway("null")


def test_the_crd_is_established_before_butlers_are_applied() -> None:
    argv = k.build_wait_crd_established(TARGET)
    assert "--for=condition=Established" in argv and "crd/butlers.butlers.dev" in argv
    assert "--namespace" not in argv


def test_after_a_restart_only_a_new_ready_pod_counts() -> None:
    def pod(uid: str, ready: bool, deleting: bool = False) -> dict:
        meta = {"uid": uid} | ({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})
        status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        return {"metadata": meta, "status": status}

    before = json.dumps({"items": [pod("old", True)]})
    assert k.pod_uids(before) == ["old"]
    during = json.dumps({"items": [pod("old", True, deleting=True), pod("new", False)]})
    assert k.ready_pod_uids(during, exclude=["old"]) == []
    # The old pod still Ready (not yet terminating) is not the restarted one.
    assert k.ready_pod_uids(json.dumps({"items": [pod("old", True)]}), exclude=["old"]) == []
    after = json.dumps({"items": [pod("new", True)]})
    assert k.ready_pod_uids(after, exclude=["old"]) == ["new"]


def test_butlers_can_reach_the_script_server_through_their_network_policy() -> None:
    values = k.build_chart_values(TARGET, "p_", "pw", ("172.18.0.1", 41234))
    assert values["networkPolicy"]["model"] == {"cidrs": ["172.18.0.1/32"], "ports": [41234]}
    assert "networkPolicy" not in k.build_chart_values(TARGET, "p_", "pw")


def test_teardown_deletes_butlers_first_and_bounded() -> None:
    argv = k.build_delete_butlers(TARGET)
    assert argv[-5:-3] == ["butlers", "--all"] and "--timeout=120s" in argv
    release = k.build_release_finalizers(TARGET, "health")
    assert release[-1] == '{"metadata":{"finalizers":null}}'
