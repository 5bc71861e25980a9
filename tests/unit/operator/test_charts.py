"""The Helm charts: strict lint clean; every rendered manifest valid for Kubernetes 1.30-1.37."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from butlers.roster import load_roster, parse_butler
from butlers_operator import crd

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "butlers"
CRDS_CHART = ROOT / "charts" / "butlers-crds"
NAMESPACE = "butlers-system"


def _roster_values() -> dict[str, Any]:
    butlers = {
        b.name: b.spec.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        for b in load_roster(ROOT / "roster")
    }
    return {"enabled": True, "butlers": butlers}


SCENARIOS: dict[str, dict[str, Any]] = {
    "namespaced": {"database": {"adminSecret": {"name": "pg-admin"}}},
    "several-namespaces": {
        "database": {"adminSecret": {"name": "pg-admin"}},
        "watch": {"mode": "namespaced", "namespaces": ["home", "work"]},
    },
    "cluster": {"database": {"adminSecret": {"name": "pg-admin"}}, "watch": {"mode": "cluster"}},
    "dev-postgres-and-roster": {"postgres": {"enabled": True}, "roster": _roster_values()},
}


def _render(chart: Path, values: dict[str, Any] | None) -> list[dict[str, Any]]:
    rendered = helm.Chart.load(chart).render(
        values, name="butlers", namespace=NAMESPACE, is_install=True
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
    roles = sorted(d["metadata"]["namespace"] for d in documents if d["kind"] == "Role")
    assert roles == ["butlers-system", "home", "work"]
    assert not [d for d in documents if d["kind"].startswith("Cluster")]
    env = _operator_env(documents)
    assert env["BUTLERS_OPERATOR_NAMESPACES"] == "butlers-system,home,work"


def test_cluster_mode_grants_a_cluster_role() -> None:
    documents = _render(CHART, SCENARIOS["cluster"])
    kinds = {d["kind"] for d in documents}
    assert {"ClusterRole", "ClusterRoleBinding"} <= kinds and "Role" not in kinds
    assert _operator_env(documents)["BUTLERS_OPERATOR_CLUSTER_WIDE"] == "true"


def test_dev_postgres_has_a_volume_claim_and_feeds_the_operator() -> None:
    documents = _render(CHART, SCENARIOS["dev-postgres-and-roster"])
    claim = next(d for d in documents if d["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    env = _operator_env(documents)
    assert env["BUTLERS_OPERATOR_ADMIN_SECRET"] == "butlers-postgres-admin"
    butlers = sorted(d["metadata"]["name"] for d in documents if d["kind"] == "Butler")
    assert butlers == sorted(b.name for b in load_roster(ROOT / "roster"))


def test_butler_env_secret_reaches_the_operator() -> None:
    values = {"database": {"adminSecret": {"name": "pg-admin"}}, "butlerEnvSecret": "site-env"}
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


def _operator_env(documents: list[dict[str, Any]]) -> dict[str, str]:
    deployment = next(
        d
        for d in documents
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}
