"""The Helm charts: strict lint clean; every rendered manifest valid for Kubernetes 1.30-1.37."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from butlers.roster import parse_butler
from butlers.settings import DashboardSettings
from butlers_operator import crd
from butlers_operator.reconcile import build_target
from butlers_operator.render import render_deployment
from butlers_operator.settings import OperatorSettings, SettingsError

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "butlers"
CRDS_CHART = ROOT / "charts" / "butlers-crds"
NAMESPACE = "butlers-system"
# Rendered here without a cluster, the chart cannot keep a generated token: give one.
DASHBOARD_TOKEN = "dashboard-token-0123456789"


SCENARIOS: dict[str, dict[str, Any]] = {
    "namespaced": {"database": {"adminSecret": {"name": "pg-admin"}}},
    "several-namespaces": {
        "database": {"adminSecret": {"name": "pg-admin"}},
        "watch": {"mode": "namespaced", "namespaces": ["home", "work"]},
    },
    "cluster": {"database": {"adminSecret": {"name": "pg-admin"}}, "watch": {"mode": "cluster"}},
    "dev-postgres": {"postgres": {"enabled": True, "password": "dev-pw"}},
    "dev-postgres-existing-secret": {"postgres": {"enabled": True, "existingSecret": "pg-pw"}},
    "network-policy": {
        "database": {"adminSecret": {"name": "pg-admin", "key": "uri"}},
        "networkPolicy": {
            "database": {"cidrs": ["10.20.0.0/16"], "ports": [6432]},
            "model": {"cidrs": ["2001:db8::/32", "203.0.113.0/24"], "ports": [443, 8443]},
            "inClusterModel": {
                "peers": [{"namespaceSelector": {"matchLabels": {"name": "models"}}}],
                "ports": [8000],
            },
            "extraEgress": [{"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}]}],
            "otlp": {"peers": [{"namespaceSelector": {"matchLabels": {"name": "observability"}}}]},
        },
        "otlp": {"endpoint": "http://otel-collector.observability.svc:4318"},
        "butlerImage": {"repository": "registry.local/butler", "pullPolicy": "Always"},
        "butlerPod": {"imagePullSecrets": ["regcred"], "priorityClassName": "butlers"},
    },
    "monitoring": {
        "database": {"adminSecret": {"name": "pg-admin"}},
        "replicas": 2,
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    },
}
for _values in SCENARIOS.values():
    _values.setdefault("dashboard", {"token": DASHBOARD_TOKEN})


def _render(
    chart: Path, values: dict[str, Any] | None, release: str = "butlers"
) -> list[dict[str, Any]]:
    rendered = helm.Chart.load(chart).render(
        values, name=release, namespace=NAMESPACE, is_install=True
    )
    documents = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".txt"):
            continue
        documents.extend(d for d in yaml.safe_load_all(text) if d)
    return documents


@pytest.mark.parametrize("values", SCENARIOS.values(), ids=SCENARIOS.keys())
@pytest.mark.parametrize("kube_version", ["v1.30.0", "v1.37.0"])
def test_operator_chart_is_strict_lint_clean(values: dict[str, Any], kube_version: str) -> None:
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version=kube_version)
    assert report["errors"] == [] and report["messages"] == []


def test_crds_chart_is_strict_lint_clean() -> None:
    report = helm.lint(CRDS_CHART, strict=True, kube_version="v1.30.0")
    assert report["errors"] == [] and report["messages"] == []


def test_crds_chart_installs_the_generated_crd(k8s_validate) -> None:  # type: ignore[no-untyped-def]
    (document,) = _render(CRDS_CHART, None)
    assert document == crd.build_crd()
    k8s_validate(document)


@pytest.mark.parametrize("values", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_every_rendered_manifest_is_valid(values: dict[str, Any], k8s_validate) -> None:  # type: ignore[no-untyped-def]
    documents = _render(CHART, values)
    assert documents
    for document in documents:
        if document["kind"] == "Butler":
            parse_butler(document, f"rendered Butler {document['metadata']['name']}")
        else:
            k8s_validate(document)


def test_namespaced_mode_grants_a_role_in_each_watched_namespace() -> None:
    documents = _render(CHART, SCENARIOS["several-namespaces"])
    roles = sorted(
        d["metadata"]["namespace"]
        for d in documents
        if d["kind"] == "Role" and d["metadata"]["name"].endswith("-operator")
    )
    assert roles == ["butlers-system", "home", "work"]
    assert not [d for d in documents if d["kind"].startswith("Cluster")]
    env = _operator_env(documents)
    assert env["BUTLERS_OPERATOR_NAMESPACES"] == "butlers-system,home,work"


def test_cluster_mode_grants_a_cluster_role() -> None:
    documents = _render(CHART, SCENARIOS["cluster"])
    kinds = {d["kind"] for d in documents if d["metadata"]["name"].endswith("-operator")}
    assert {"ClusterRole", "ClusterRoleBinding"} <= kinds and "Role" not in kinds
    assert _operator_env(documents)["BUTLERS_OPERATOR_CLUSTER_WIDE"] == "true"


def test_dev_postgres_has_a_volume_claim_and_feeds_the_operator() -> None:
    documents = _render(CHART, SCENARIOS["dev-postgres"])
    claim = next(d for d in documents if d["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    env = _operator_env(documents)
    assert env["BUTLERS_OPERATOR_ADMIN_SECRET"] == "butlers-postgres-admin"
    # The operator chart installs no Butlers: deleting it never takes them along.
    assert not [d for d in documents if d["kind"] == "Butler"]


def test_dev_postgres_password_survives_reinstall_and_renders_without_a_cluster() -> None:
    documents = _render(CHART, SCENARIOS["dev-postgres"])
    secret = next(
        d for d in documents if d["kind"] == "Secret" and "postgres" in d["metadata"]["name"]
    )
    # Kept on uninstall like the volume, so a reinstall finds (and reuses) it.
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # Rendered without cluster access (helm template, Argo CD), a generated password would
    # change at every render: the chart refuses and says what to set.
    with pytest.raises(helm.HelmError, match=r"postgres\.password or postgres\.existingSecret"):
        _render(CHART, {"postgres": {"enabled": True}, "dashboard": {"token": DASHBOARD_TOKEN}})


def test_dev_postgres_dsn_escapes_the_password() -> None:
    from urllib.parse import unquote, urlsplit

    password = "p@ss w+rd/:%?#"
    documents = _render(
        CHART,
        {"postgres": {"enabled": True, "password": password}, "dashboard": {"enabled": False}},
    )
    secret = next(d for d in documents if d["kind"] == "Secret")
    dsn = base64.b64decode(secret["data"]["dsn"]).decode()
    parts = urlsplit(dsn)
    assert unquote(parts.password or "") == password
    assert (parts.hostname, parts.port, parts.path) == (
        "butlers-postgres.butlers-system.svc",
        5432,
        "/butlers",
    )


def test_an_existing_password_secret_is_used_as_is() -> None:
    documents = _render(CHART, SCENARIOS["dev-postgres-existing-secret"])
    assert not [
        d for d in documents if d["kind"] == "Secret" and "postgres" in d["metadata"]["name"]
    ]
    settings = _settings(documents)
    assert settings.admin_secret == "pg-pw"
    assert settings.admin_defaults == {
        "host": "butlers-postgres.butlers-system.svc",
        "user": "postgres",
        "dbname": "butlers",
    }
    postgres = next(
        d for d in documents if d["kind"] == "Deployment" and "postgres" in d["metadata"]["name"]
    )
    env = postgres["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["valueFrom"]["secretKeyRef"] == {"name": "pg-pw", "key": "password"}


def test_every_value_reaches_the_operator() -> None:
    settings = _settings(_render(CHART, SCENARIOS["network-policy"]))
    assert settings.admin_secret_key == "uri"
    assert settings.image_pull_policy == "Always"
    assert settings.butler_image == "registry.local/butler:0.1.0"
    assert settings.otlp_endpoint == "http://otel-collector.observability.svc:4318"
    assert settings.pod_defaults.image_pull_secrets == ("regcred",)
    assert settings.pod_defaults.priority_class_name == "butlers"
    network = settings.network_policy
    assert network.enabled
    assert network.model.cidrs == ("2001:db8::/32", "203.0.113.0/24")
    assert network.model.ports == (443, 8443)
    assert network.database.ports == (6432,)
    assert network.in_cluster_model.ports == (8000,)
    assert network.extra_egress == ({"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}]},)
    off = _render(CHART, SCENARIOS["namespaced"] | {"networkPolicy": {"enabled": False}})
    assert not _settings(off).network_policy.enabled


def test_with_dev_postgres_butlers_reach_it_by_pod_selector() -> None:
    database = _settings(_render(CHART, SCENARIOS["dev-postgres"])).network_policy.database
    assert {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "butlers-postgres",
                "app.kubernetes.io/instance": "butlers",
            }
        },
    } in database.peers


@pytest.mark.parametrize("scenario", ["namespaced", "cluster"])
def test_rbac_grants_what_the_operator_uses_and_no_secret_listing(scenario: str) -> None:
    documents = _render(CHART, SCENARIOS[scenario])
    role = next(
        d
        for d in documents
        if d["kind"] in {"Role", "ClusterRole"} and d["metadata"]["name"].endswith("-operator")
    )
    verbs: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for resource in rule["resources"]:
            verbs.setdefault(resource, set()).update(rule["verbs"])
    assert verbs["secrets"] == {"get", "create", "patch"}
    assert verbs["butlers/finalizers"] == {"update"}
    assert verbs["butlers/status"] == {"patch"}  # read through the Butler itself
    assert verbs["events"] == {"create"}
    assert {"list", "watch"} <= verbs["deployments"]
    assert "delete" in verbs["networkpolicies"]
    assert not any("*" in rule["verbs"] for rule in role["rules"])


def test_butler_env_secret_reaches_the_operator() -> None:
    values = SCENARIOS["namespaced"] | {"butlerEnvSecret": "site-env"}
    assert _operator_env(_render(CHART, values))["BUTLERS_OPERATOR_BUTLER_ENV_SECRET"] == "site-env"
    assert "BUTLERS_OPERATOR_BUTLER_ENV_SECRET" not in _operator_env(
        _render(CHART, SCENARIOS["namespaced"])
    )


def test_missing_admin_secret_is_a_clear_error() -> None:
    with pytest.raises(helm.HelmError, match=r"database\.adminSecret\.name is required"):
        _render(CHART, {})


def test_values_schema_rejects_an_unknown_watch_mode() -> None:
    chart = helm.Chart.load(CHART)
    with pytest.raises(helm.HelmValuesError, match="mode"):
        chart.validate_schema({"watch": {"mode": "everywhere"}})


def _dashboard(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(
        d
        for d in documents
        if d["kind"] == kind
        and d["metadata"]["labels"]["app.kubernetes.io/name"] == "butlers-dashboard"
    )


def _dashboard_env(documents: list[dict[str, Any]]) -> dict[str, Any]:
    container = _dashboard(documents, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_dashboard_runs_over_the_release_namespace_with_the_operators_role() -> None:
    documents = _render(CHART, SCENARIOS["namespaced"])
    deployment = _dashboard(documents, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] + container["args"] == ["butlers", "dashboard", "--kube", NAMESPACE]
    env = _dashboard_env(documents)
    # The operator writes the dashboard's database credentials where the dashboard reads them.
    secret = _settings(documents).dashboard_secret
    assert env["BUTLERS_DASHBOARD_DSN"] == {"secretKeyRef": {"name": secret, "key": "dsn"}}
    assert env["BUTLERS_DASHBOARD_SCHEMA"] == {"secretKeyRef": {"name": secret, "key": "schema"}}
    # Writes go through the butlers' MCP with the namespace's user token.
    assert env["BUTLERS_DASHBOARD_MCP_TOKEN"] == {
        "secretKeyRef": {"name": "butlers-auth", "key": "user-token"}
    }
    token = _dashboard(documents, "Secret")
    assert env["BUTLERS_DASHBOARD_TOKEN"] == {
        "secretKeyRef": {"name": token["metadata"]["name"], "key": "token"}
    }
    assert base64.b64decode(token["data"]["token"]).decode() == DASHBOARD_TOKEN
    # What `butlers dashboard` builds from that environment: listening off loopback is
    # allowed because the token is set.
    values = {k: v for k, v in env.items() if isinstance(v, str)}
    values |= {
        "BUTLERS_DASHBOARD_TOKEN": DASHBOARD_TOKEN,
        "BUTLERS_DASHBOARD_DSN": "postgresql://x",
    }
    settings = DashboardSettings.from_env(values, kube_namespace=NAMESPACE)
    assert (settings.host, settings.port) == ("::", 40200)
    service = _dashboard(documents, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "dashboard"
    assert container["readinessProbe"]["httpGet"]["path"] == "/api/health"


def test_the_dashboard_may_only_read_butlers_and_their_pods_logs() -> None:
    documents = _render(CHART, SCENARIOS["namespaced"])
    role = _dashboard(documents, "Role")
    assert role["rules"] == [
        {"apiGroups": ["butlers.dev"], "resources": ["butlers"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    assert role["metadata"]["namespace"] == NAMESPACE
    # Also when the operator watches the whole cluster: the dashboard's grants stay namespaced.
    cluster_wide = _render(CHART, SCENARIOS["cluster"])
    assert _dashboard(cluster_wide, "Role")["rules"] == role["rules"]
    assert not [
        d
        for d in cluster_wide
        if d["kind"] in {"ClusterRole", "ClusterRoleBinding"}
        and d["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "butlers-dashboard"
    ]
    binding = _dashboard(documents, "RoleBinding")
    account = _dashboard(documents, "ServiceAccount")
    pod = _dashboard(documents, "Deployment")["spec"]["template"]["spec"]
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_the_dashboard_network_policy_names_each_flow() -> None:
    documents = _render(CHART, SCENARIOS["dev-postgres"])
    policy = _dashboard(documents, "NetworkPolicy")["spec"]
    assert policy["ingress"] == [{"ports": [{"port": "dashboard", "protocol": "TCP"}]}]
    egress = policy["egress"]
    ports = [sorted(p["port"] for p in rule.get("ports", [])) for rule in egress]
    assert [53, 53] in ports  # DNS
    assert [443, 6443] in ports  # the API server
    database = next(r for r in egress if [p["port"] for p in r.get("ports", [])] == [5432])
    assert any(
        peer.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name")
        == "butlers-postgres"
        for peer in database["to"]
    )
    butlers = next(r for r in egress if "ports" not in r)
    assert butlers["to"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "butler"}}}]
    # The butlers' own policies admit pods with the dashboard's label.
    labels = _dashboard(documents, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert OperatorSettings().network_policy.dashboard_labels.items() <= labels.items()
    restricted = SCENARIOS["namespaced"] | {
        "dashboard": {
            "token": DASHBOARD_TOKEN,
            "networkPolicy": {"ingressFrom": [{"podSelector": {"matchLabels": {"x": "y"}}}]},
        }
    }
    policy = _dashboard(_render(CHART, restricted), "NetworkPolicy")["spec"]
    assert policy["ingress"][0]["from"] == [{"podSelector": {"matchLabels": {"x": "y"}}}]


def test_run_as_user_can_be_left_to_the_platform() -> None:
    """OpenShift's restricted-v2 assigns a UID from the namespace's range and rejects a
    fixed one: `runAsUser: null` sets none on any pod (still non-root)."""
    fixed = _render(CHART, SCENARIOS["namespaced"])
    for deployment in (d for d in fixed if d["kind"] == "Deployment"):
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001
    assert _settings(fixed).pod_defaults.run_as_user == 10001
    assigned = _render(CHART, SCENARIOS["namespaced"] | {"runAsUser": None})
    for deployment in (d for d in assigned if d["kind"] == "Deployment"):
        security = deployment["spec"]["template"]["spec"]["securityContext"]
        assert "runAsUser" not in security and "runAsGroup" not in security
        assert security["runAsNonRoot"] is True
    settings = _settings(assigned)
    assert settings.pod_defaults.run_as_user is None
    spec = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())["spec"]
    body = {"metadata": {"name": "health", "namespace": "home", "uid": "u"}, "spec": spec}
    pod = render_deployment(build_target(body, settings), settings, "x")["spec"]["template"]
    security = pod["spec"]["securityContext"]
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(security)
    assert security["runAsNonRoot"] is True


def test_everything_listens_on_both_address_families() -> None:
    """IPv6-only clusters: the butlers and the dashboard listen on `::` (dual-stack), the
    operator's liveness server on its pod's family."""
    documents = _render(CHART, SCENARIOS["namespaced"])
    assert _dashboard_env(documents)["BUTLERS_DASHBOARD_HOST"] == "::"
    env = _operator_env(documents)
    assert "BUTLERS_OPERATOR_POD_IP" in {e["name"] for e in _operator_container(documents)["env"]}
    assert OperatorSettings.from_env(
        env | {"BUTLERS_OPERATOR_POD_IP": "fd00::5"}
    ).liveness_endpoint == ("http://[::]:8080/healthz")
    assert OperatorSettings.from_env(
        env | {"BUTLERS_OPERATOR_POD_IP": "10.1.2.3"}
    ).liveness_endpoint == ("http://0.0.0.0:8080/healthz")


def test_metrics_are_served_and_scraped_with_the_operators_token() -> None:
    documents = _render(CHART, SCENARIOS["monitoring"])
    settings = _settings(documents)
    assert settings.metrics_endpoint == "http://0.0.0.0:8081/metrics"
    ports = {p["name"]: p["containerPort"] for p in _operator_container(documents)["ports"]}
    assert ports["metrics"] == 8081
    (service,) = [
        d for d in documents if d["kind"] == "Service" and "metrics" in d["metadata"]["name"]
    ]
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    (monitor,) = [d for d in documents if d["kind"] == "ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["bearerTokenSecret"] == {"name": settings.metrics_secret, "key": "token"}
    assert not [d for d in _render(CHART, SCENARIOS["namespaced"]) if d["kind"] == "ServiceMonitor"]
    off = _render(CHART, SCENARIOS["namespaced"] | {"metrics": {"enabled": False}})
    assert _settings(off).metrics_endpoint is None


def test_replicas_elect_a_leader_over_a_lease() -> None:
    documents = _render(CHART, SCENARIOS["monitoring"])
    deployment = next(
        d
        for d in documents
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "butlers-operator"
    )
    assert deployment["spec"]["replicas"] == 2
    settings = _settings(documents)
    assert settings.lease_name == "butlers-operator"
    env = {e["name"]: e for e in _operator_container(documents)["env"]}
    assert env["BUTLERS_OPERATOR_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    (role,) = [
        d for d in documents
        if d["kind"] == "Role" and d["metadata"]["namespace"] == NAMESPACE
        and d["metadata"]["name"] == "butlers-operator"
    ]  # fmt: skip
    leases = [r for r in role["rules"] if "leases" in r["resources"]]
    assert leases and set(leases[0]["verbs"]) == {"get", "create", "patch"}


def test_tracing_without_a_collector_flow_is_refused() -> None:
    """Spans to an endpoint the NetworkPolicy blocks would be dropped without a word."""
    values = SCENARIOS["namespaced"] | {"otlp": {"endpoint": "http://otel.obs.svc:4318"}}
    with pytest.raises(helm.HelmError, match=r"networkPolicy\.otlp has no cidrs or peers"):
        _render(CHART, values)
    off = values | {"networkPolicy": {"enabled": False}}
    assert _settings(_render(CHART, off)).otlp_endpoint == "http://otel.obs.svc:4318"
    env = _operator_env(_render(CHART, SCENARIOS["namespaced"]))
    env["BUTLERS_OPERATOR_OTLP_ENDPOINT"] = "http://otel.obs.svc:4318"
    with pytest.raises(SettingsError, match="every span would be dropped"):
        OperatorSettings.from_env(env)


def test_the_dashboard_token_is_given_existing_or_made_by_the_operator() -> None:
    existing = SCENARIOS["namespaced"] | {"dashboard": {"existingSecret": "my-token"}}
    documents = _render(CHART, existing)
    assert not [d for d in documents if d["kind"] == "Secret"]
    assert _dashboard_env(documents)["BUTLERS_DASHBOARD_TOKEN"] == {
        "secretKeyRef": {"name": "my-token", "key": "token"}
    }
    assert _settings(documents).dashboard_token_secret is None
    given = _render(CHART, SCENARIOS["namespaced"])
    secret = _dashboard(given, "Secret")
    assert base64.b64decode(secret["data"]["token"]).decode() == DASHBOARD_TOKEN
    assert _settings(given).dashboard_token_secret is None
    # Neither: the chart renders without a cluster (no token of its own, nothing random),
    # and the operator creates the Secret the dashboard reads.
    offline = _render(CHART, {"database": {"adminSecret": {"name": "pg-admin"}}})
    assert not [d for d in offline if d["kind"] == "Secret"]
    assert offline == _render(CHART, {"database": {"adminSecret": {"name": "pg-admin"}}})
    made = _settings(offline).dashboard_token_secret
    assert made == "butlers-dashboard"
    assert _dashboard_env(offline)["BUTLERS_DASHBOARD_TOKEN"] == {
        "secretKeyRef": {"name": made, "key": "token"}
    }
    chart = helm.Chart.load(CHART)
    with pytest.raises(helm.HelmValuesError, match="token"):
        chart.validate_schema({"dashboard": {"token": "short"}})


def test_each_release_names_its_own_dashboard_role() -> None:
    """Roles are server-wide: two releases on one server (empty schemaPrefix, the default)
    must not share the dashboard's role or schema."""

    def names(release: str, prefix: str = "") -> tuple[str, str]:
        values = {
            "database": {"adminSecret": {"name": "pg-admin"}, "schemaPrefix": prefix},
            "dashboard": {"token": DASHBOARD_TOKEN},
        }
        settings = _settings(_render(CHART, values, release))
        return settings.dashboard_role, settings.dashboard_schema

    assert names("butlers") == ("butlers_dashboard", "butlers_dashboard")
    assert names("team-b") == ("team_b_dashboard", "team_b_dashboard")
    assert names("team-b", "x_") == ("x_team_b_dashboard", "x_team_b_dashboard")


def test_the_dashboard_shows_a_watched_namespace_and_runs_there() -> None:
    values = SCENARIOS["several-namespaces"] | {
        "dashboard": {"token": DASHBOARD_TOKEN, "namespace": "home"}
    }
    documents = _render(CHART, values)
    dashboard = [
        d
        for d in documents
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "butlers-dashboard"
    ]
    assert {d["metadata"]["namespace"] for d in dashboard} == {"home"}
    container = _dashboard(documents, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["dashboard", "--kube", "home"]
    assert _settings(documents).dashboard_namespace == "home"
    unwatched = SCENARIOS["namespaced"] | {
        "dashboard": {"token": DASHBOARD_TOKEN, "namespace": "x"}
    }
    with pytest.raises(helm.HelmError, match="dashboard.namespace x is not watched"):
        _render(CHART, unwatched)


def test_the_dashboard_can_be_turned_off() -> None:
    values = SCENARIOS["namespaced"] | {"dashboard": {"enabled": False}}
    documents = _render(CHART, values)
    assert not [
        d
        for d in documents
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "butlers-dashboard"
    ]
    assert _settings(documents).dashboard_secret is None


def _settings(documents: list[dict[str, Any]]) -> OperatorSettings:
    """The operator's settings, as it builds them from the rendered Deployment's env."""
    return OperatorSettings.from_env(_operator_env(documents))


def _operator_container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(
        d
        for d in documents
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")
    )
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def _operator_env(documents: list[dict[str, Any]]) -> dict[str, str]:
    """The operator's env values (those from the downward API left out)."""
    return {e["name"]: e["value"] for e in _operator_container(documents)["env"] if "value" in e}
