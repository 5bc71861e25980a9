"""The GitOps recipes in docs/gitops.md, rendered offline exactly as written.

Argo CD and Flux render charts without cluster access (no `lookup`), so each recipe's
values must render as they stand, twice the same (a sync must not change anything), and
every manifest must be valid Kubernetes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[3]
GITOPS = ROOT / "docs" / "gitops.md"


def _documents() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", GITOPS.read_text(), flags=re.S)
    return [d for block in blocks for d in yaml.safe_load_all(block) if isinstance(d, dict)]


def _render(chart: str, values: dict[str, Any], release: str, namespace: str) -> list[Any]:
    rendered = helm.Chart.load(ROOT / chart).render(
        values, name=release, namespace=namespace, is_install=True
    )
    return [
        d
        for path, text in sorted(rendered.items())
        if not path.endswith(".txt")
        for d in yaml.safe_load_all(text)
        if d
    ]


def _check(chart: str, values: dict[str, Any], release: str, namespace: str, validate) -> None:  # type: ignore[no-untyped-def]
    documents = _render(chart, values, release, namespace)
    assert documents, f"{chart} rendered nothing"
    assert documents == _render(chart, values, release, namespace), "a render is not stable"
    for document in documents:
        validate(document)


def test_the_argo_cd_recipe_renders_offline(k8s_validate) -> None:  # type: ignore[no-untyped-def]
    (platform,) = [
        d for d in _documents()
        if d.get("kind") == "Application" and d["metadata"]["name"] == "butlers-platform"
    ]  # fmt: skip
    namespace = platform["spec"]["destination"]["namespace"]
    sources = platform["spec"]["sources"]
    assert {s["path"] for s in sources} == {"charts/butlers", "charts/butlers-crds"}
    for source in sources:
        helm_options = source.get("helm") or {}
        release = helm_options.get("releaseName") or platform["metadata"]["name"]
        values = helm_options.get("valuesObject") or {}
        _check(source["path"], values, release, namespace, k8s_validate)


def test_the_flux_recipe_renders_offline(k8s_validate) -> None:  # type: ignore[no-untyped-def]
    releases = [d for d in _documents() if d.get("kind") == "HelmRelease"]
    assert {r["spec"]["chart"]["spec"]["chart"] for r in releases} == {
        "charts/butlers", "charts/butlers-crds"
    }  # fmt: skip
    for release in releases:
        spec = release["spec"]
        namespace = spec["targetNamespace"]
        # Flux's release name: `<targetNamespace>-<name>` when a target namespace is set.
        name = spec.get("releaseName") or f"{namespace}-{release['metadata']['name']}"
        _check(
            spec["chart"]["spec"]["chart"], spec.get("values") or {}, name, namespace, k8s_validate
        )
