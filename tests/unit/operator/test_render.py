"""What the operator renders for a Butler: valid manifests that run it safely."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from butlers.auth.tokens import TokenBook, butler_token, digest
from butlers.db.provision import Credentials
from butlers.roster import load_butler_file, parse_butler
from butlers.spec import ButlerSpec
from butlers_operator import render
from butlers_operator.auth import AuthInputs
from butlers_operator.settings import OperatorSettings

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = OperatorSettings(operator_namespace="butlers-system")
CREDENTIALS = Credentials(schema="health", role="health", password="s3cret")
DSN = "postgresql://health:s3cret@postgres.butlers:5432/butlers"
AUTH = AuthInputs("bu_user-token", "k" * 64, "switchboard")


def _target(name: str = "health", **spec: object) -> render.ButlerTarget:
    base = load_butler_file(ROOT / "roster" / f"{name}.yaml").spec
    merged = ButlerSpec.model_validate(base.model_dump(by_alias=True, mode="json") | spec)
    return render.ButlerTarget(name=name, namespace="home", uid="uid-1", spec=merged)


def _container(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _all(target: render.ButlerTarget) -> list[dict]:
    return render.render_all(target, SETTINGS, CREDENTIALS, DSN, 5432, auth=AUTH)


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
    assert butler["startupProbe"]["httpGet"]["path"] == "/health"
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


def test_pool_sizes_of_the_spec_reach_the_butler_container_only() -> None:
    target = _target(database={"pool": {"minSize": 3, "maxSize": 7}})
    deployment = render.render_deployment(target, SETTINGS, "x")
    env = {e["name"]: e.get("value") for e in _container(deployment)["env"]}
    assert env["BUTLERS_POOL_MIN_SIZE"] == "3"
    assert env["BUTLERS_POOL_MAX_SIZE"] == "7"
    unset = _container(render.render_deployment(_target(database={}), SETTINGS, "x"))
    assert not {e["name"] for e in unset["env"]} & {
        "BUTLERS_POOL_MIN_SIZE",
        "BUTLERS_POOL_MAX_SIZE",
    }
    migrate = deployment["spec"]["template"]["spec"]["initContainers"][0]
    assert "BUTLERS_POOL_MIN_SIZE" not in {e["name"] for e in migrate["env"]}


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


def test_the_migrate_container_gets_the_butlers_resources() -> None:
    """A namespace ResourceQuota on limits.cpu judges every container of the pod: the
    init container must carry the CPU limit the Butler sets, or no pod is ever admitted."""
    limits = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m"}}
    deployment = render.render_deployment(_target(resources=limits), SETTINGS, "x")
    pod = deployment["spec"]["template"]["spec"]
    (migrate,) = pod["initContainers"]
    assert (
        migrate["resources"]
        == pod["containers"][0]["resources"]
        == {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m"},
        }
    )


def test_endpoint_is_the_service_dns_name() -> None:
    assert _target().endpoint == "http://health.home.svc:40103/mcp"


def test_readiness_waits_longer_than_the_ready_checks_own_timeout() -> None:
    from butlers.daemon.serve import READY_TIMEOUT

    butler = _container(render.render_deployment(_target(), SETTINGS, "x"))
    assert butler["readinessProbe"]["timeoutSeconds"] > READY_TIMEOUT
    startup = butler["startupProbe"]
    # A slow start gets minutes before liveness may kill it.
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120
    assert butler["livenessProbe"]["timeoutSeconds"] >= 2


def test_only_the_switchboard_pod_carries_the_switchboard_role() -> None:
    def pod_labels(target: render.ButlerTarget) -> dict:
        deployment = render.render_deployment(target, SETTINGS, "x")
        return deployment["spec"]["template"]["metadata"]["labels"]

    assert pod_labels(_target("switchboard"))["butlers.dev/role"] == "switchboard"
    assert "butlers.dev/role" not in pod_labels(_target("health"))
    # A butler *named* switchboard without the module is no switchboard.
    named = render.ButlerTarget(
        name="switchboard", namespace="home", uid="u", spec=_target("health").spec
    )
    assert "butlers.dev/role" not in pod_labels(named)


def test_pod_overrides_reach_the_pod_and_defaults_fill_the_rest() -> None:
    from butlers_operator.settings import PodDefaults

    settings = OperatorSettings(
        pod_defaults=PodDefaults(image_pull_secrets=("site-pull",), priority_class_name="low")
    )
    target = _target(
        pod={
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "priorityClassName": "butlers-high",
            "labels": {"team": "home"},
            "annotations": {"example.com/x": "1"},
            "env": [{"name": "NO_PROXY", "value": ".svc"}],
            "volumes": [{"name": "ca", "configMap": {"name": "site-ca"}}],
            "volumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/site", "readOnly": True}],
        }
    )
    deployment = render.render_deployment(target, settings, "x")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "site-pull"}]
    assert pod["priorityClassName"] == "butlers-high"
    assert pod["nodeSelector"] == {"disk": "ssd"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert {"name": "ca", "configMap": {"name": "site-ca"}} in pod["volumes"]
    butler = _container(deployment)
    assert {"name": "NO_PROXY", "value": ".svc"} in butler["env"]
    assert butler["volumeMounts"][-1]["mountPath"] == "/etc/ssl/site"
    template = deployment["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "home"
    assert template["annotations"]["example.com/x"] == "1"
    assert render.CONFIG_HASH_ANNOTATION in template["annotations"]


def test_rotating_a_secret_the_pod_reads_rolls_the_pod() -> None:
    target = _target(
        env=[{"name": "TOKEN", "secretKeyRef": {"name": "tokens", "key": "bot"}}],
        runtime={"adapter": "openai", "credentialsSecret": "llm-keys"},
    )
    settings = OperatorSettings(butler_env_secret="site-env")
    refs = render.referenced_inputs(target, settings)
    assert refs.secrets == {"site-env": None, "llm-keys": None, "tokens": frozenset({"bot"})}

    def config_hash(llm_key: str, bot: str) -> str:
        inputs = render.PodInputs(
            secrets={"site-env": {}, "llm-keys": {"KEY": llm_key}, "tokens": {"bot": bot}}
        )
        config_map = render.render_config_map(target)
        secret = render.render_secret(target, CREDENTIALS, DSN)
        return render.build_config_hash(config_map, secret, inputs)

    assert config_hash("a", "b") == config_hash("a", "b")
    assert config_hash("a", "b") != config_hash("rotated", "b")
    assert config_hash("a", "b") != config_hash("a", "rotated")


def test_schema_names_are_unique_per_namespace_and_valid_identifiers() -> None:
    from butlers.db.provision import IDENTIFIER
    from butlers_operator.target import build_schema_name

    assert build_schema_name("home", "health") == "home_health"
    assert build_schema_name("work", "health") != build_schema_name("home", "health")
    assert build_schema_name("home", "health", "p_") == "p_home_health"
    assert build_schema_name("1st", "health").startswith("_")
    long_ns = "n" * 63
    one, two = build_schema_name(long_ns, "a" * 32), build_schema_name(long_ns + "x"[:0], "a" * 31)
    assert one != two
    for name in (one, two, build_schema_name("1st", "health")):
        assert IDENTIFIER.match(name), name


def test_network_policy_can_be_disabled() -> None:
    from butlers_operator.settings import NetworkPolicySettings

    settings = OperatorSettings(network_policy=NetworkPolicySettings(enabled=False))
    objects = render.render_all(_target(), settings, CREDENTIALS, DSN, 5432, auth=AUTH)
    kinds = [m["kind"] for m in objects]
    assert "NetworkPolicy" not in kinds and "Deployment" in kinds


def test_channel_egress_ports_come_from_module_config_and_match_the_modules() -> None:
    from butlers.modules.email.module import EmailConfig
    from butlers.modules.telegram.module import TelegramConfig
    from butlers_operator import netpol

    assert EmailConfig().smtp_port == netpol.EMAIL_SMTP_PORT
    assert EmailConfig().imap_port == netpol.EMAIL_IMAP_PORT
    assert TelegramConfig().api_base == netpol.TELEGRAM_API
    spec = _target(
        modules={"email": {"smtpPort": 465, "imapHost": "imap.example.com"}, "telegram": {}}
    ).spec
    assert netpol.channel_ports(spec) == [443, 465, 993]
    assert netpol.channel_ports(_target().spec) == []


def test_pod_labels_cannot_replace_the_operators_own() -> None:
    target = _target(pod={"labels": {"team": "home"}})
    deployment = render.render_deployment(target, SETTINGS, "x")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["butlers.dev/butler"] == "health" and labels["team"] == "home"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert all(labels[k] == v for k, v in selector.items())


@pytest.mark.parametrize(
    ("part", "key"),
    [
        ("labels", "butlers.dev/role"),  # the switchboard's role: NetworkPolicies trust it
        ("labels", "butlers.dev/butler"),
        ("labels", "app.kubernetes.io/name"),
        ("annotations", "butlers.dev/config-hash"),
    ],
)
def test_pod_labels_and_annotations_under_the_operators_prefixes_are_refused(
    part: str, key: str
) -> None:
    with pytest.raises(ValidationError, match=f"{key}.*are the operator's"):
        _target(pod={part: {key: "switchboard"}})


# -- tokens --------------------------------------------------------------------------


def _auth_values(target: render.ButlerTarget, auth: AuthInputs = AUTH) -> dict[str, str]:
    secret = next(
        m
        for m in render.render_all(target, SETTINGS, CREDENTIALS, DSN, 5432, auth=auth)
        if m["metadata"]["name"] == f"{target.name}-auth"
    )
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_each_butler_gets_its_own_token_and_the_digests_it_checks() -> None:
    values = _auth_values(_target("health"))
    book = TokenBook(registration_key=AUTH.registration_key)
    identity = book.verify(values["token"])
    assert identity is not None and (identity.kind, identity.name) == ("butler", "health")
    assert values["user-token-sha256"] == f"user={digest(AUTH.user_token)}"
    switchboard = butler_token(AUTH.registration_key, "switchboard")
    assert values["switchboard-token-sha256"] == digest(switchboard)
    assert values["registration-key"] == "", "only the switchboard holds the key"


def test_only_the_switchboard_gets_the_registration_key() -> None:
    assert _auth_values(_target("switchboard"))["registration-key"] == AUTH.registration_key


def test_the_pod_reads_its_tokens_from_its_secret_and_answers_its_service_names() -> None:
    deployment = next(m for m in _all(_target("health")) if m["kind"] == "Deployment")
    env = {e["name"]: e for e in _container(deployment)["env"]}
    for variable in ("BUTLERS_TOKEN", "BUTLERS_USER_TOKEN_SHA256", "BUTLERS_REGISTRATION_KEY"):
        assert env[variable]["valueFrom"]["secretKeyRef"]["name"] == "health-auth"
    hosts = env["BUTLERS_ALLOWED_HOSTS"]["value"].split(",")
    assert hosts == ["health", "health.home", "health.home.svc", "health.home.svc.cluster.local"]
    rendered_text = json.dumps([m for m in _all(_target("health")) if m["kind"] != "Secret"])
    assert AUTH.user_token not in rendered_text and AUTH.registration_key not in rendered_text


def test_a_rotated_user_token_rolls_the_pods() -> None:
    def config_hash(auth: AuthInputs) -> str:
        objects = render.render_all(_target("health"), SETTINGS, CREDENTIALS, DSN, 5432, auth=auth)
        deployment = next(m for m in objects if m["kind"] == "Deployment")
        return deployment["spec"]["template"]["metadata"]["annotations"][
            render.CONFIG_HASH_ANNOTATION
        ]

    rotated = AuthInputs("bu_another-token", AUTH.registration_key, AUTH.switchboard)
    assert config_hash(AUTH) != config_hash(rotated)


def test_the_render_command_refuses_a_messenger_owner_unlike_the_switchboards(
    tmp_path: Path,
) -> None:
    from butlers.errors import RosterError
    from butlers_operator.render_cli import render_command

    root = Path(__file__).resolve().parents[3] / "roster"
    for name in ("switchboard", "messenger"):
        document = yaml.safe_load((root / f"{name}.yaml").read_text())
        owner = {"email": ["owner@example.org"] if name == "switchboard" else ["x@example.org"]}
        document["spec"]["modules"][name]["owner"] = owner
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(
        RosterError, match=r"messenger\.yaml: spec\.modules\.messenger\.owner\.email"
    ):
        render_command([str(tmp_path)], "home", SETTINGS, io.StringIO())
