"""What a merge patch must remove: fields the operator set before and no longer wants.

A JSON merge patch leaves keys it does not mention alone, so taking a pod override out
of a Butler (`spec.pod.nodeSelector`, a label, ...) would never reach the Deployment.
`build_removals` compares what the server holds with what the operator now renders and
returns the `null`s to send with it:

- the pod template's scheduling fields the operator renders from `spec.pod` or the
  chart's pod defaults, when the render no longer has them;
- pod labels and annotations the Butler's `spec.pod` set before (recorded on the
  Deployment in `POD_METADATA_ANNOTATION`) and no longer sets, and labels under the
  operator's own prefixes (a role label of a butler that stopped being the switchboard).
  Keys others set (`kubectl rollout restart`'s annotation) are left alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from butlers.spec import RESERVED_LABEL_PREFIXES

# On the Deployment: the label and annotation keys its pod template has from spec.pod.
POD_METADATA_ANNOTATION = "butlers.dev/pod-metadata"
POD_OVERRIDE_KEYS = (
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
)


def build_pod_metadata_record(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    return json.dumps({"labels": sorted(labels), "annotations": sorted(annotations)})


def _recorded(live: Mapping[str, Any]) -> dict[str, list[str]]:
    raw = ((live.get("metadata") or {}).get("annotations") or {}).get(POD_METADATA_ANNOTATION)
    try:
        record = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(record, dict):
        return {}
    return {
        key: [str(item) for item in value]
        for key, value in record.items()
        if isinstance(value, list)
    }


def build_removals(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """A merge-patch fragment of `null`s for what `live` has and `desired` dropped ({}:
    nothing to remove)."""
    if desired.get("kind") != "Deployment":
        return {}
    want = desired["spec"]["template"]
    have = ((live.get("spec") or {}).get("template")) or {}
    spec_nulls = {
        key: None
        for key in POD_OVERRIDE_KEYS
        if key in (have.get("spec") or {}) and key not in want["spec"]
    }
    recorded = _recorded(live)
    meta_nulls: dict[str, Any] = {}
    for part in ("labels", "annotations"):
        wanted = want["metadata"].get(part) or {}
        held = (have.get("metadata") or {}).get(part) or {}
        ours = set(recorded.get(part, ()))
        if part == "labels":
            ours |= {k for k in held if k.startswith(RESERVED_LABEL_PREFIXES)}
        gone = {key: None for key in sorted(ours & set(held)) if key not in wanted}
        if gone:
            meta_nulls[part] = gone
    template: dict[str, Any] = {}
    if spec_nulls:
        template["spec"] = spec_nulls
    if meta_nulls:
        template["metadata"] = meta_nulls
    return {"spec": {"template": template}} if template else {}


def merge_patches(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `extra`'s keys merged in (objects recursively)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_patches(out[key], value)
        else:
            out[key] = value
    return out
