"""The Butler CustomResourceDefinition, generated from the pydantic spec model.

`butlers.spec.ButlerSpec` is the single source of truth. Its JSON Schema
(pydantic, camelCase aliases) is rewritten into a Kubernetes *structural*
OpenAPI v3 schema: `$ref`s inlined, `anyOf [X, null]` as `nullable: true`,
JSON-Schema-2020 numeric bounds as OpenAPI 3.0 ones, free-form JSON values as
`x-kubernetes-preserve-unknown-fields`, and the model validators that the API
server can check as CEL rules (`x-kubernetes-validations`).

Regenerate the committed file with `python -m butlers_operator.crd`; a unit
test fails when it and the model disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from butlers.spec import (
    API_GROUP,
    API_VERSION,
    KIND,
    NAME_PATTERN,
    RESERVED_ENV_PREFIX,
    RESERVED_LABEL_PREFIXES,
    ButlerSpec,
)

PLURAL = "butlers"
CRD_NAME = f"{PLURAL}.{API_GROUP}"
CRD_PATH = Path("charts/butlers-crds/templates/butlers.dev_butlers.yaml")
# A PostgreSQL identifier is at most 63 bytes; a schema prefix needs room too.
NAME_MAX = 32
_RESERVED_ENV = {
    "rule": f"!self.name.startsWith('{RESERVED_ENV_PREFIX}')",
    "message": f"names starting with {RESERVED_ENV_PREFIX} are the butler's own settings",
}

_DROPPED_KEYS = {"title", "additionalProperties", "$defs", "propertyNames", "patternProperties"}

# Rules the model enforces in Python that the API server can enforce too.
_CEL_RULES: dict[str, list[dict[str, str]]] = {
    "ScheduleSpec": [
        {
            "rule": "has(self.prompt) != has(self.job)",
            "message": "a schedule needs exactly one of 'prompt' or 'job'",
        }
    ],
    "EnvVarSpec": [
        {
            "rule": "!(has(self.value) && has(self.secretKeyRef))",
            "message": "set at most one of 'value' or 'secretKeyRef'",
        },
        _RESERVED_ENV,
    ],
    "PodEnvVar": [
        {
            "rule": "!(has(self.value) && has(self.valueFrom))",
            "message": "set at most one of 'value' or 'valueFrom'",
        },
        _RESERVED_ENV,
    ],
    "PodSpec": [
        {
            "rule": f"!has(self.{field}) || !self.{field}.exists(k, "
            + " || ".join(f"k.startsWith('{prefix}')" for prefix in RESERVED_LABEL_PREFIXES)
            + ")",
            "message": f"{field}: keys starting with "
            + " or ".join(RESERVED_LABEL_PREFIXES)
            + " are the operator's",
        }
        for field in ("labels", "annotations")
    ],
}
# Lists whose items are keyed by `name`: the API server rejects duplicates and
# server-side apply merges them per item.
_MAP_LISTS = {"schedules", "env"}  # spec.pod.env too (same property name)
# Five whitespace-separated cron fields; croniter checks the rest in the operator.
_CRON_PATTERN = r"^\S+(\s+\S+){4}$"


def build_spec_schema() -> dict[str, Any]:
    """The structural openAPIV3Schema of `spec`, from `ButlerSpec`."""
    raw = ButlerSpec.model_json_schema(by_alias=True, mode="validation")
    return _convert(raw, raw.get("$defs", {}), name=None)


def _convert(node: dict[str, Any], defs: dict[str, Any], name: str | None) -> dict[str, Any]:
    if "$ref" in node:
        def_name = node["$ref"].rsplit("/", 1)[-1]
        merged = {**defs[def_name], **{k: v for k, v in node.items() if k != "$ref"}}
        resolved = _convert(merged, defs, name)
        if def_name in _CEL_RULES:
            resolved["x-kubernetes-validations"] = _CEL_RULES[def_name]
        return resolved
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"{name}: only `X | None` unions map onto a structural schema")
        rest = {k: v for k, v in node.items() if k not in {"anyOf", "default"}}
        nullable = _convert({**options[0], **rest}, defs, name)
        nullable["nullable"] = True
        return nullable
    if not node.get("type") and "properties" not in node:
        # A free-form JSON value (pydantic's JsonValue).
        return {"x-kubernetes-preserve-unknown-fields": True}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or (key == "default" and value is None):
            continue
        if key == "properties":
            out[key] = {k: _convert(v, defs, k) for k, v in value.items()}
        elif key == "items":
            out[key] = _convert(value, defs, name)
        elif key in {"exclusiveMinimum", "exclusiveMaximum"}:
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            out[bound], out[key] = value, True
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    if node.get("type") == "object" and "properties" not in node:
        out.update(_map_schema(node, defs, name))
    if name in _MAP_LISTS and node.get("type") == "array":
        out["x-kubernetes-list-type"] = "map"
        out["x-kubernetes-list-map-keys"] = ["name"]
    if name == "cron":
        out["pattern"] = _CRON_PATTERN
    return out


def _map_schema(node: dict[str, Any], defs: dict[str, Any], name: str | None) -> dict[str, Any]:
    """A `dict[str, X]`: additionalProperties, with CEL for a key pattern."""
    patterns = node.get("patternProperties", {})
    key_pattern = node.get("propertyNames", {}).get("pattern")
    if patterns:
        key_pattern, values = next(iter(patterns.items()))
    else:
        values = node.get("additionalProperties", {})
    out: dict[str, Any] = {}
    value_schema = _convert(values, defs, None) if isinstance(values, dict) else {}
    if value_schema == {"x-kubernetes-preserve-unknown-fields": True}:
        # jobArgs, a module's config: any JSON object, kept as written.
        out["x-kubernetes-preserve-unknown-fields"] = True
    else:
        out["additionalProperties"] = value_schema
    if key_pattern:
        out["maxProperties"] = 64
        out["x-kubernetes-validations"] = [
            {
                "rule": f"self.all(k, k.matches('{key_pattern}'))",
                "message": f"{name} keys must match {key_pattern}",
            }
        ]
    return out


def build_status_schema() -> dict[str, Any]:
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer", "format": "int64"},
        },
    }
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,  # kopf keeps its own bookkeeping here
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "phase": {"type": "string", "enum": ["Pending", "Provisioning", "Ready", "Failed"]},
            "ready": {"type": "boolean"},
            "endpoint": {"type": "string", "description": "The in-cluster MCP URL."},
            "schema": {"type": "string", "description": "The butler's PostgreSQL schema."},
            "restarts": {
                "type": "integer",
                "format": "int32",
                "description": "Container restarts of the butler's current pods.",
            },
            "lastRestart": {
                "type": "object",
                "nullable": True,
                "description": "The latest run the kubelet ended and restarted (OOMKilled: "
                "the memory limit).",
                "properties": {
                    "pod": {"type": "string"},
                    "container": {"type": "string"},
                    "reason": {"type": "string"},
                    "exitCode": {"type": "integer", "format": "int32"},
                    "finishedAt": {"type": "string", "format": "date-time"},
                },
            },
            "conditions": {
                "type": "array",
                "items": condition,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        },
    }


def build_crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": build_spec_schema(),
            "status": build_status_schema(),
        },
        "x-kubernetes-validations": [
            {
                "rule": f"self.metadata.name.matches('{NAME_PATTERN}')",
                "message": (
                    f"metadata.name must match {NAME_PATTERN} (at most {NAME_MAX} characters): "
                    "it names the butler's PostgreSQL schema and role"
                ),
            }
        ],
    }
    columns = [
        ("Phase", "string", ".status.phase", ""),
        ("Ready", "boolean", ".status.ready", ""),
        (
            "Reason",
            "string",
            '.status.conditions[?(@.type=="Ready")].reason',
            "Why the butler is (not) Ready",
        ),
        ("Restarts", "integer", ".status.restarts", "Container restarts of its pods"),
        ("Endpoint", "string", ".status.endpoint", ""),
        ("Age", "date", ".metadata.creationTimestamp", ""),
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {"app.kubernetes.io/part-of": "butlers"},
            # Uninstalling the chart, or pruning by a GitOps tool, must never delete every
            # Butler with the CRD; Argo CD applies it before anything that uses it.
            "annotations": {
                "helm.sh/resource-policy": "keep",
                "argocd.argoproj.io/sync-options": "Prune=false",
                "argocd.argoproj.io/sync-wave": "-1",
            },
        },
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": ["bt"],
                "categories": ["butlers"],
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": n, "type": t, "jsonPath": p} | ({"description": d} if d else {})
                        for n, t, p, d in columns
                    ],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def render_crd_yaml() -> str:
    header = "# Generated from butlers.spec.ButlerSpec by `python -m butlers_operator.crd`.\n"
    header += "# Do not edit: change the model and regenerate.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or check) the generated Butler CRD.")
    parser.add_argument("--output", type=Path, default=CRD_PATH)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = parser.parse_args(argv)
    text = render_crd_yaml()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python -m butlers_operator.crd", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
