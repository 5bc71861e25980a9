"""The kind backend's commands and its one skip reason, without Docker or a cluster."""

from __future__ import annotations

from pathlib import Path

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
    assert load[:3] == ["kind", "load", "docker-image"] and load[-2:] == tags


def test_helm_installs_into_the_session_namespace_and_waits() -> None:
    argv = k.build_helm_install(ROOT / "charts/butlers", Path("/tmp/v.yaml"), TARGET)
    assert argv[:4] == ["helm", "upgrade", "--install", "butlers"]
    assert argv[argv.index("--namespace") + 1] == "butlers-e2e-abc123"
    assert argv[argv.index("--kube-context") + 1] == "kind-butlers"
    assert "--wait" in argv


def test_chart_values_give_the_session_its_prefix_database_and_env_secret() -> None:
    values = k.build_chart_values(TARGET, "e2e_tabc123_")
    assert values["database"]["schemaPrefix"] == "e2e_tabc123_"
    assert values["postgres"]["enabled"] is True
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
