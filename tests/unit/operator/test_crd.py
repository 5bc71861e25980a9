"""The committed Butler CRD is generated from the pydantic model and is structural."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from butlers_operator import crd

ROOT = Path(__file__).resolve().parents[3]


def _walk(node: Any, path: str = "$"):  # type: ignore[no-untyped-def]
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


def _schema() -> dict[str, Any]:
    return crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_committed_crd_matches_the_model() -> None:
    committed = (ROOT / crd.CRD_PATH).read_text()
    assert committed == crd.render_crd_yaml(), (
        "charts/butlers-crds is stale: run `python -m butlers_operator.crd`"
    )


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text("kind: Nothing\n")
    assert crd.main(["--output", str(stale), "--check"]) == 1
    assert crd.main(["--output", str(stale)]) == 0
    assert crd.main(["--output", str(stale), "--check"]) == 0


def test_crd_is_a_valid_kubernetes_object(k8s_validate) -> None:  # type: ignore[no-untyped-def]
    k8s_validate(crd.build_crd())


def test_schema_has_no_refs_unions_or_closed_objects() -> None:
    for path, node in _walk(_schema()):
        assert not {"$ref", "$defs", "anyOf", "oneOf", "const"} & set(node), path
        assert not ("properties" in node and "additionalProperties" in node), path


def test_every_schema_node_has_a_type_or_preserves_unknown_fields() -> None:
    def check(node: dict[str, Any], path: str) -> None:
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        for name, child in node.get("properties", {}).items():
            check(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            check(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            check(node["additionalProperties"], f"{path}{{}}")

    check(_schema(), "")


def test_optional_fields_are_nullable_not_unions() -> None:
    runtime = _schema()["properties"]["spec"]["properties"]["runtime"]["properties"]
    assert runtime["model"] == {"minLength": 1, "type": "string", "nullable": True}


def test_enums_ranges_and_patterns_come_from_the_model() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    assert spec["port"]["minimum"] == 1024 and spec["port"]["maximum"] == 65535
    assert spec["database"]["properties"]["reclaimPolicy"]["enum"] == ["Retain", "Delete"]
    assert spec["database"]["properties"]["reclaimPolicy"]["default"] == "Retain"
    timeout = spec["runtime"]["properties"]["timeoutSeconds"]
    assert timeout["minimum"] == 0 and timeout["exclusiveMinimum"] is True
    assert spec["schedules"]["items"]["properties"]["name"]["pattern"].startswith("^[a-z0-9]")


def test_free_form_values_preserve_unknown_fields() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    assert spec["modules"]["additionalProperties"]["x-kubernetes-preserve-unknown-fields"]
    job_args = spec["schedules"]["items"]["properties"]["jobArgs"]
    assert job_args == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_model_validators_become_cel_rules() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    rules = [r["rule"] for r in spec["schedules"]["items"]["x-kubernetes-validations"]]
    assert rules == ["has(self.prompt) != has(self.job)"]
    assert spec["schedules"]["x-kubernetes-list-map-keys"] == ["name"]
    assert spec["env"]["x-kubernetes-list-type"] == "map"


def test_status_subresource_and_printer_columns() -> None:
    version = crd.build_crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names == ["Phase", "Ready", "Reason", "Restarts", "Endpoint", "Age"]
    reason = version["additionalPrinterColumns"][2]
    assert reason["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'


def _openapi_to_jsonschema(node: Any) -> Any:
    """Enough of OpenAPI 3.0 → JSON Schema to check documents against the CRD offline."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_to_jsonschema(v) for k, v in node.items() if not k.startswith("x-")}
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if node.get("exclusiveMinimum") is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    if node.get("nullable"):
        out["type"] = [out["type"], "null"]
        out.pop("nullable")
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "roster").glob("*.yaml")), ids=lambda p: p.stem)
def test_roster_files_are_valid_butler_objects(path: Path) -> None:
    schema = _openapi_to_jsonschema(_schema())
    schema["properties"]["metadata"] = {"type": "object"}
    jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_unknown_spec_field_is_rejected_by_the_schema() -> None:
    schema = _openapi_to_jsonschema(_schema())
    document = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())
    document["spec"]["prot"] = 1
    with pytest.raises(jsonschema.ValidationError, match="prot"):
        jsonschema.validate(document, schema)


def _cel_rules() -> dict[str, list[str]]:
    """Every CEL rule of the schema, by the JSON path of the node it sits on."""
    return {
        path: [rule["rule"] for rule in node["x-kubernetes-validations"]]
        for path, node in _walk(_schema())
        if "x-kubernetes-validations" in node
    }


def _cel_allows(rule: str, value: Any) -> bool:
    import cel

    context = cel.Context()
    context.add_variable("self", value)
    return bool(cel.evaluate(rule, context))


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("health", True), ("my-butler-2", True), ("Health", False), ("2fa", False),
     ("ends-", False), ("a" * 32, True), ("a" * 33, False), ("under_score", False)],
)  # fmt: skip
def test_cel_rejects_a_name_that_cannot_name_a_schema(name: str, allowed: bool) -> None:
    (rule,) = _cel_rules()["$"]
    assert _cel_allows(rule, {"metadata": {"name": name}, "spec": {}}) is allowed


@pytest.mark.parametrize("path", ["env", "pod.properties.env"])
def test_cel_rejects_env_names_that_shadow_the_butlers_settings(path: str) -> None:
    node = "$.properties.spec.properties." + path
    rules = _cel_rules()[f"{node}.items"]
    assert all(_cel_allows(r, {"name": "TZ", "value": "UTC"}) for r in rules)
    assert not all(_cel_allows(r, {"name": "BUTLERS_DSN", "value": "x"}) for r in rules)


def test_cel_rules_match_the_model_validators() -> None:
    rules = _cel_rules()
    (schedule,) = rules["$.properties.spec.properties.schedules.items"]
    assert _cel_allows(schedule, {"name": "a", "cron": "* * * * *", "prompt": "p"})
    assert not _cel_allows(schedule, {"name": "a", "cron": "* * * * *"})
    assert not _cel_allows(schedule, {"name": "a", "cron": "* * * * *", "prompt": "p", "job": "j"})
    pod_env = rules["$.properties.spec.properties.pod.properties.env.items"]
    both = {"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}
    assert not all(_cel_allows(r, both) for r in pod_env)


@pytest.mark.parametrize(
    ("pod", "allowed"),
    [
        ({}, True),
        ({"labels": {"team": "home"}, "annotations": {"example.com/a": "b"}}, True),
        ({"labels": {"butlers.dev/role": "switchboard"}}, False),
        ({"labels": {"app.kubernetes.io/name": "butler"}}, False),
        ({"annotations": {"butlers.dev/config-hash": "x"}}, False),
    ],
)
def test_cel_refuses_the_operators_label_prefixes(pod: dict[str, Any], allowed: bool) -> None:
    rules = _cel_rules()["$.properties.spec.properties.pod"]
    assert all(_cel_allows(r, pod) for r in rules) is allowed


def test_long_texts_are_bounded() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    assert spec["instructions"]["maxLength"] == 16384
    assert spec["routing"]["properties"]["hints"]["maxItems"] == 32
    assert spec["routing"]["properties"]["hints"]["items"]["maxLength"] == 512
    assert spec["schedules"]["maxItems"] == 32
    assert spec["schedules"]["items"]["properties"]["prompt"]["maxLength"] == 4096


def test_gitops_tools_apply_the_crd_first_and_never_prune_it() -> None:
    annotations = crd.build_crd()["metadata"]["annotations"]
    assert annotations["argocd.argoproj.io/sync-wave"] == "-1"
    assert annotations["argocd.argoproj.io/sync-options"] == "Prune=false"
    assert annotations["helm.sh/resource-policy"] == "keep"
    for path in sorted((ROOT / "roster").glob("*.yaml")):
        metadata = yaml.safe_load(path.read_text())["metadata"]
        assert metadata["annotations"]["argocd.argoproj.io/sync-wave"] == "1", path.name
