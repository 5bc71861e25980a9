"""What the operator renders for a Butler: valid manifests that run it safely."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from butlers.db.provision import Credentials
from butlers.roster import load_butler_file, parse_butler
from butlers.spec import ButlerSpec
from butlers_operator import render
from butlers_operator.settings import OperatorSettings

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = OperatorSettings(operator_namespace="butlers-system")
CREDENTIALS = Credentials(schema="health", role="health", password="s3cret")
DSN = "postgresql://health:s3cret@postgres.butlers:5432/butlers"


def _target(name: str = "health", **spec: object) -> render.ButlerTarget:
    base = load_butler_file(ROOT / "roster" / f"{name}.yaml").spec
    merged = ButlerSpec.model_validate(base.model_dump(by_alias=True, mode="json") | spec)
    return render.ButlerTarget(name=name, namespace="home", uid="uid-1", spec=merged)


def _container(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _all(target: render.ButlerTarget) -> list[dict]:
    return render.render_all(target, SETTINGS, CREDENTIALS, DSN, 5432)


@pytest.mark.parametrize("name", ["health", "switchboard", "general"])
def test_every_rendered_object_is_valid_kubernetes(name: str, k8s_validate) -> None:  # type: ignore[no-untyped-def]
    for manifest in _all(_target(name)):
        k8s_validate(manifest)


def test_every_object_is_owned_by_the_butler() -> None:
    for manifest in _all(_target()):
        (owner,) = manifest["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "name": "health",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert manifest["metadata"]["namespace"] == "home"


def test_config_map_holds_a_spec_file_that_butlers_serve_reads() -> None:
    target = _target(modules={"health": {"units": "metric"}})
    text = render.render_config_map(target)["data"]["butler.yaml"]
    resource = parse_butler(yaml.safe_load(text), "configmap")
    assert resource.name == "health"
    assert resource.spec == target.spec


def test_secret_carries_the_butler_role_credentials() -> None:
    secret = render.render_secret(_target(), CREDENTIALS, DSN)
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {"dsn": DSN, "schema": "health", "role": "health", "password": "s3cret"}


def test_butler_dsn_uses_the_host_pods_reach() -> None:
    admin = "postgresql://postgres:pw@127.0.0.1:5433/butlers"
    dsn = render.build_butler_dsn(CREDENTIALS, admin, "postgres.db.svc")
    assert dsn == "postgresql://health:s3cret@postgres.db.svc:5433/butlers"
    assert render.build_butler_dsn(CREDENTIALS, admin, None).startswith("postgresql://health:")


def test_deployment_runs_one_non_root_replica_recreated_with_migrations_first() -> None:
    deployment = render.render_deployment(_target(), SETTINGS, "abc")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (init,) = pod["initContainers"]
    assert init["args"] == ["migrate", "--spec", render.SPEC_PATH]
    (butler,) = pod["containers"]
    assert butler["args"] == ["serve", "--spec", render.SPEC_PATH]
    for container in (init, butler):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert butler["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert butler["livenessProbe"]["httpGet"]["path"] == "/health"
    assert butler["ports"] == [{"name": "mcp", "containerPort": 40103, "protocol": "TCP"}]


def test_a_spec_change_changes_the_pod_template_hash() -> None:
    def config_hash(target: render.ButlerTarget) -> str:
        deployment = next(m for m in _all(target) if m["kind"] == "Deployment")
        return deployment["spec"]["template"]["metadata"]["annotations"][
            render.CONFIG_HASH_ANNOTATION
        ]

    assert config_hash(_target()) == config_hash(_target())
    assert config_hash(_target()) != config_hash(_target(instructions="Be brief."))


def test_a_password_change_changes_the_pod_template_hash() -> None:
    config_map = render.render_config_map(_target())
    other = Credentials(schema="health", role="health", password="rotated")
    before = render.build_config_hash(config_map, render.render_secret(_target(), CREDENTIALS, DSN))
    after = render.build_config_hash(config_map, render.render_secret(_target(), other, DSN))
    assert before != after


def test_spec_env_and_credentials_secret_reach_the_container() -> None:
    target = _target(
        env=[
            {"name": "TZ", "value": "UTC"},
            {"name": "TOKEN", "secretKeyRef": {"name": "t", "key": "k"}},
        ],
        runtime={"adapter": "openai", "credentialsSecret": "llm-keys"},
    )
    butler = _container(render.render_deployment(target, SETTINGS, "x"))
    env = {e["name"]: e for e in butler["env"]}
    assert env["TZ"]["value"] == "UTC"
    assert env["TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "t", "key": "k"}}
    assert butler["envFrom"] == [{"secretRef": {"name": "llm-keys"}}]


def test_the_butler_env_secret_reaches_the_container_but_not_the_spec() -> None:
    settings = OperatorSettings(butler_env_secret="site-env")
    target = _target(runtime={"adapter": "openai", "credentialsSecret": "llm-keys"})
    butler = _container(render.render_deployment(target, settings, "x"))
    assert butler["envFrom"] == [
        {"secretRef": {"name": "site-env", "optional": True}},
        {"secretRef": {"name": "llm-keys"}},
    ]
    assert "site-env" not in render.render_spec_file(target)


def test_with_a_switchboard_the_butler_registers_under_its_service_url() -> None:
    url = "http://switchboard.home.svc:40100/mcp"
    env = {e["name"]: e.get("value") for e in _container(
        render.render_deployment(_target(), SETTINGS, "x", switchboard_url=url)
    )["env"]}  # fmt: skip
    assert env["BUTLERS_SWITCHBOARD_URL"] == url
    assert env["BUTLERS_ADVERTISE_URL"] == "http://health.home.svc:40103/mcp"
    alone = _container(render.render_deployment(_target(), SETTINGS, "x"))
    assert not {e["name"] for e in alone["env"]} & {
        "BUTLERS_SWITCHBOARD_URL",
        "BUTLERS_ADVERTISE_URL",
    }


def test_spec_image_and_resources_override_the_defaults() -> None:
    target = _target(image="registry.local/butler:dev", resources={"limits": {"memory": "1Gi"}})
    butler = _container(render.render_deployment(target, SETTINGS, "x"))
    assert butler["image"] == "registry.local/butler:dev"
    assert butler["resources"] == {"limits": {"memory": "1Gi"}}


def test_network_policy_admits_only_switchboard_dashboard_and_operator() -> None:
    policy = render.render_network_policy(_target(), SETTINGS, 5432)
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 40103}]
    selectors = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]
    assert {"butlers.dev/butler": "switchboard"} in selectors
    assert {"app.kubernetes.io/name": "butlers-dashboard"} in selectors
    operator = rule["from"][2]["namespaceSelector"]["matchLabels"]
    assert operator == {"kubernetes.io/metadata.name": "butlers-system"}


def test_network_policy_egress_reaches_database_dns_and_model() -> None:
    policy = render.render_network_policy(_target(), SETTINGS, 6543)
    ports = [p for rule in policy["spec"]["egress"] for p in rule.get("ports", [])]
    assert {"protocol": "TCP", "port": 6543} in ports
    assert {"protocol": "UDP", "port": 53} in ports
    assert {"protocol": "TCP", "port": 443} in ports


def test_endpoint_is_the_service_dns_name() -> None:
    assert _target().endpoint == "http://health.home.svc:40103/mcp"
