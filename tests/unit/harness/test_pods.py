"""Pods as local processes: Service addresses, selectors and probes from rendered objects."""

from __future__ import annotations

from tests.e2e.harness.pods import (
    build_service_hosts,
    readiness_path,
    resolve_service_urls,
    selects,
)

SERVICE = {
    "metadata": {"name": "switchboard", "namespace": "home"},
    "spec": {"selector": {"butlers.dev/butler": "switchboard"}, "ports": [{"port": 40100}]},
}
DEPLOYMENT = {
    "metadata": {"name": "switchboard"},
    "spec": {
        "template": {
            "metadata": {"labels": {"butlers.dev/butler": "switchboard", "x": "y"}},
            "spec": {
                "containers": [
                    {"name": "butler", "readinessProbe": {"httpGet": {"path": "/ready"}}}
                ]
            },
        }
    },
}


def test_every_cluster_name_of_a_service_resolves_to_the_local_port() -> None:
    hosts = build_service_hosts(SERVICE, 51234)
    for url in (
        "http://switchboard:40100/mcp",
        "http://switchboard.home:40100/mcp",
        "http://switchboard.home.svc:40100/mcp",
        "http://switchboard.home.svc.cluster.local:40100/mcp",
    ):
        assert resolve_service_urls(url, hosts) == "http://127.0.0.1:51234/mcp"


def test_other_hosts_and_ports_are_left_alone() -> None:
    hosts = build_service_hosts(SERVICE, 51234)
    for value in ("http://switchboard.home.svc:9999/mcp", "https://api.example.com:443/v1", "x"):
        assert resolve_service_urls(value, hosts) == value


def test_a_service_selects_the_deployment_whose_pods_carry_its_labels() -> None:
    assert selects(SERVICE, DEPLOYMENT)
    other = {"metadata": SERVICE["metadata"], "spec": {"selector": {"butlers.dev/butler": "x"}}}
    assert not selects(other, DEPLOYMENT)


def test_readiness_comes_from_the_containers_probe() -> None:
    assert readiness_path(DEPLOYMENT, "butler") == "/ready"
    assert readiness_path(DEPLOYMENT, "sidecar") == "/"
