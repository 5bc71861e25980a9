"""The service proxy's reading of Services and EndpointSlices."""

from __future__ import annotations

from tests.kube.proxy import ready_targets, split_service_host


def test_cluster_dns_names_split_into_namespace_and_service() -> None:
    assert split_service_host("web", "home") == ("home", "web")
    assert split_service_host("web.work", "home") == ("work", "web")
    assert split_service_host("web.work.svc", "home") == ("work", "web")
    assert split_service_host("web.work.svc.cluster.local", "home") == ("work", "web")
    assert split_service_host("api.example.com", "home") is None


def test_only_ready_pod_endpoints_of_the_named_port_are_targets() -> None:
    slices = [
        {
            "ports": [{"name": "mcp", "port": 40103}],
            "endpoints": [
                {"conditions": {"ready": True}, "targetRef": {"kind": "Pod", "uid": "a"}},
                {"conditions": {"ready": False}, "targetRef": {"kind": "Pod", "uid": "b"}},
                {"conditions": {"ready": True}},
            ],
        },
        {
            "ports": [{"name": "metrics", "port": 9090}],
            "endpoints": [
                {"conditions": {"ready": True}, "targetRef": {"kind": "Pod", "uid": "c"}}
            ],
        },
    ]
    assert ready_targets(slices, "mcp") == [("a", 40103)]
    assert ready_targets(slices, "metrics") == [("c", 9090)]
    assert ready_targets(slices, "other") == []
