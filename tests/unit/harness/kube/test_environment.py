"""A container's environment: $(VAR) expansion, downward API, Services made local."""

from __future__ import annotations

from tests.kube.environment import (
    build_container_env,
    expand,
    resolve_address,
    with_field_refs,
)

POD = {
    "metadata": {"name": "health-abc", "namespace": "home", "uid": "u1", "labels": {"app": "h"}},
    "spec": {"nodeName": "node-1", "serviceAccountName": "health"},
    "status": {"podIP": "10.244.0.7"},
}
SERVICES = {
    ("home", "switchboard", 40100): "127.0.0.1:21000",
    ("work", "db", 5432): "127.0.0.1:21001",
}


def lookup(namespace: str, host: str, port: int) -> str | None:
    parts = host.split(".")
    if host == "10.96.0.9" and port == 40100:
        return SERVICES[("home", "switchboard", 40100)]
    if len(parts) == 1:
        return SERVICES.get((namespace, parts[0], port))
    if len(parts) == 2 or ".".join(parts[2:]) in ("svc", "svc.cluster.local"):
        return SERVICES.get((parts[1], parts[0], port))
    return None


def test_references_to_earlier_variables_expand_and_dollar_dollar_escapes() -> None:
    env = {"HOST": "db", "PORT": "5432"}
    assert expand("postgresql://$(HOST):$(PORT)/x", env) == "postgresql://db:5432/x"
    assert expand("$$(HOST) and $(MISSING)", env) == "$(HOST) and $(MISSING)"


def test_every_cluster_name_of_a_service_becomes_its_local_address() -> None:
    for value in (
        "http://switchboard:40100/mcp",
        "http://switchboard.home:40100/mcp",
        "http://switchboard.home.svc:40100/mcp",
        "http://switchboard.home.svc.cluster.local:40100/mcp",
        "http://10.96.0.9:40100/mcp",
    ):
        assert resolve_address(value, "home", lookup) == "http://127.0.0.1:21000/mcp"
    assert resolve_address("db.work.svc:5432", "home", lookup) == "127.0.0.1:21001"


def test_other_addresses_and_passwords_that_look_like_ports_are_left_alone() -> None:
    for value in (
        "https://api.example.com:443/v1",
        "http://switchboard.home.svc:9999/mcp",
        "postgresql://switchboard:40100@127.0.0.1:5432/butlers",
        "db:5432",  # a short name resolves in the pod's own namespace only
    ):
        assert resolve_address(value, "home", lookup) == value


def test_downward_api_field_refs_become_values() -> None:
    container = {
        "env": [
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]
    }
    env = {v["name"]: v["value"] for v in with_field_refs(container, POD)["env"]}
    assert env == {"NAME": "health-abc", "NS": "home", "APP": "h", "IP": "10.244.0.7"}


def test_secret_refs_expansion_and_service_names_in_one_environment() -> None:
    container = {
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
            {"name": "URL", "value": "http://switchboard.home.svc:40100/mcp?t=$(TOKEN)"},
        ]
    }
    secrets = {"s": {"kind": "Secret", "data": {"token": "czNjcmV0"}}}
    env = build_container_env(container, POD, secrets, {}, lookup)
    assert env == {"TOKEN": "s3cret", "URL": "http://127.0.0.1:21000/mcp?t=s3cret"}
