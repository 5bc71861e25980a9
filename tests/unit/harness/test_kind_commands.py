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
    save, load = k.build_kind_load(TARGET, Path("/tmp/x/images.tar"), "linux/amd64")
    # One platform saved (a multi-arch image under Docker's containerd store cannot be
    # saved whole), then loaded from the archive.
    assert save[:4] == ["docker", "save", "--platform", "linux/amd64"]
    assert save[save.index("--output") + 1] == "/tmp/x/images.tar"
    assert save[-3:-1] == tags
    # The chart's PostgreSQL too: a kind node pulls nothing itself.
    assert save[-1] == k.POSTGRES_IMAGE
    assert load == ["kind", "load", "image-archive", "--name", "butlers", "/tmp/x/images.tar"]


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", "linux/amd64"), ("aarch64", "linux/arm64"), ("arm64", "linux/arm64")],
)
def test_images_are_saved_for_the_nodes_platform(machine: str, expected: str) -> None:
    assert k.node_platform(machine) == expected


def test_chart_values_give_the_session_its_prefix_database_and_env_secret() -> None:
    values = k.build_chart_values(TARGET, "e2e_tabc123_", "pw")
    assert values["database"]["schemaPrefix"] == "e2e_tabc123_"
    assert values["postgres"] == {"enabled": True, "password": "pw"}
    assert values["butlerEnvSecret"] == k.ENV_SECRET
    assert values["butlerImage"] == {"repository": "ghcr.io/butlers-dev/butler", "tag": "0.1.0"}


def test_kubectl_commands_target_the_context_and_namespace() -> None:
    reused = k.KindTarget(namespace="ns1", context="my-cluster")
    argv = k.build_port_forward(reused, "general", 50001, 40101)
    assert argv[1:5] == ["--context", "my-cluster", "--namespace", "ns1"]
    assert argv[-2:] == ["service/general", "50001:40101"]
    assert k.build_kill_pod(reused, "general")[1:5] == argv[1:5]


def test_a_killed_butler_is_stopped_before_the_call_returns_and_held_by_a_cordon() -> None:
    kill = k.build_kill_pod(TARGET, "general")
    assert "--force" not in kill and {"--now", "--wait=true"} <= set(kill)
    assert kill[kill.index("--selector") + 1] == "butlers.dev/butler=general"
    cordon, uncordon = k.build_cordon(TARGET, False), k.build_cordon(TARGET, True)
    assert cordon[5:] == ["cordon", "--selector", "kubernetes.io/hostname"]
    assert uncordon[5:] == ["uncordon", "--selector", "kubernetes.io/hostname"]


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
    load = k.build_kind_load(target, Path("images.tar"))[-1]
    assert load[load.index("--name") + 1] == "other"
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


def test_an_engine_older_than_api_1_48_saves_without_platform(tmp_path: Path) -> None:
    assert not k.save_takes_platform("1.41")
    assert k.save_takes_platform("1.48") and k.save_takes_platform("1.51\n")
    assert not k.save_takes_platform("")
    save, _ = k.build_kind_load(TARGET, tmp_path / "a.tar", with_platform=False)
    assert "--platform" not in save


def test_a_node_with_its_own_postgres_gets_only_our_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(k.NODE_POSTGRES_ENV, "localhost/butlers-kind/postgres:18")
    save, _ = k.build_kind_load(TARGET, tmp_path / "a.tar")
    assert k.POSTGRES_IMAGE not in save and TARGET.butler_image in save
    values = k.build_chart_values(TARGET, "e2e_", "pw")
    assert values["postgres"]["image"] == "localhost/butlers-kind/postgres:18"


def test_the_network_is_inspected_on_the_kind_lanes_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k.DOCKER_HOST_ENV, "unix:///run/x.sock")
    assert k.build_network_inspect()[:3] == ["docker", "--host", "unix:///run/x.sock"]
    monkeypatch.delenv(k.DOCKER_HOST_ENV)
    assert k.build_network_inspect()[:2] == ["docker", "network"]


def test_butlers_reach_the_telegram_stand_in_on_the_host_and_only_its_port() -> None:
    values = k.build_chart_values(TARGET, "p_", "pw", ("172.18.0.1", 41234), [41235])
    assert values["networkPolicy"]["extraEgress"] == [
        {
            "to": [{"ipBlock": {"cidr": "172.18.0.1/32"}}],
            "ports": [{"protocol": "TCP", "port": 41235}],
        }
    ]
    plain = k.build_chart_values(TARGET, "p_", "pw", ("172.18.0.1", 41234))
    assert "extraEgress" not in plain["networkPolicy"]


def test_a_port_forward_follows_its_services_ready_pods() -> None:
    def endpoint(pod: str, ready: bool) -> dict[str, object]:
        return {"targetRef": {"name": pod}, "conditions": {"ready": ready}}

    def item(service: str, *endpoints: dict[str, object] | None) -> dict[str, object]:
        labels = {"kubernetes.io/service-name": service}
        return {"metadata": {"labels": labels}, "endpoints": list(endpoints) or None}

    gone = endpoint("db-0", True) | {"conditions": {"ready": False, "terminating": True}}
    db = item("db", gone, endpoint("db-1", False), endpoint("db-2", True))
    assert k.pods_by_service(json.dumps({"items": [db, item("hx")]})) == {
        "db": (frozenset({"db-2"}), frozenset({"db-1", "db-2"})),
        "hx": (frozenset(), frozenset()),
    }


def test_butlers_reach_the_sessions_caldav_server_through_the_extra_egress_rule() -> None:
    env = {
        "BUTLERS_SCRIPT_URL": "http://172.18.0.1:41234/v1",
        "TELEGRAM_API_BASE": "http://172.18.0.1:41235",
        "CALDAV_URL": "http://172.18.0.1:41236/owner/",
        "CALDAV_USERNAME": "owner",
    }
    assert k.extra_host_ports(env) == [41235, 41236]
    assert k.extra_host_ports({"CALDAV_URL": "", "TELEGRAM_API_BASE": ""}) == []


def test_a_crash_stops_the_butlers_process_on_its_node_before_its_pod_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def pod(name: str, state: str, deleting: bool = False) -> dict[str, object]:
        meta = {"uid": name} | ({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})
        status = {"name": "butler", "containerID": f"containerd://{name}-c", "state": {state: {}}}
        return {
            "metadata": meta,
            "spec": {"nodeName": "butlers-control-plane"},
            "status": {"containerStatuses": [status]},
        }

    pods = json.dumps(
        {"items": [pod("a", "running"), pod("b", "waiting"), pod("c", "running", True)]}
    )
    assert k.running_containers(pods, "butler") == [("butlers-control-plane", "a-c")]
    assert k.running_containers(pods, "sidecar") == []
    assert k.container_pid(json.dumps({"info": {"pid": 2976}})) == 2976
    for bad in ('{"info": {"pid": 0}}', '{"status": {}}', "not json"):
        with pytest.raises(k.KindCommandError, match="crictl inspect"):
            k.container_pid(bad)
    monkeypatch.setenv(k.DOCKER_HOST_ENV, "unix:///run/x.sock")
    assert k.build_freeze("butlers-control-plane", 2976) == [
        "docker", "--host", "unix:///run/x.sock",
        "exec", "butlers-control-plane", "kill", "-STOP", "2976",
    ]  # fmt: skip
