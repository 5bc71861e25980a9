"""Who a rendered object belongs to: the validated Butler, its names and its labels."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from butlers.spec import FULL_API_VERSION, KIND, ButlerSpec

BUTLER_LABEL = "butlers.dev/butler"
ROLE_LABEL = "butlers.dev/role"
SWITCHBOARD_ROLE = "switchboard"
APP_LABEL = "app.kubernetes.io/name"
APP = "butler"
IDENTIFIER_MAX = 63
_IDENTIFIER_START = re.compile(r"^[a-z_]")


@dataclass(frozen=True)
class ButlerTarget:
    """One Butler object, validated: what every renderer needs to know about it."""

    name: str
    namespace: str
    uid: str
    spec: ButlerSpec

    @property
    def secret_name(self) -> str:
        return f"{self.name}-db"

    @property
    def config_map_name(self) -> str:
        return f"{self.name}-spec"

    @property
    def endpoint(self) -> str:
        """The in-cluster MCP URL (the Service's DNS name)."""
        return build_endpoint(self.name, self.namespace, self.spec.port)

    @property
    def owner(self) -> str:
        """Who the butler's schema belongs to: recorded on it, refused to anyone else."""
        return f"{self.namespace}/{self.name}"


def build_endpoint(name: str, namespace: str, port: int) -> str:
    """A butler's in-cluster MCP URL: its Service's DNS name and port."""
    return f"http://{name}.{namespace}.svc:{port}/mcp"


def build_schema_name(namespace: str, name: str, prefix: str = "") -> str:
    """The schema (and role) of a Butler: unique per namespace, a valid identifier.

    `<prefix><namespace>_<name>` with `-` as `_`; when that is too long for PostgreSQL
    (63 bytes) it is cut and ends in a digest of namespace/name, so it stays unique.
    Ambiguous spellings (`a-b`/`c` against `a`/`b-c`) are caught by the owner each
    schema records. `butlers up` keeps its short names (`butlers.spec.schema_name`).
    """
    base = f"{namespace}_{name}".replace("-", "_")
    if not _IDENTIFIER_START.match(prefix or base):
        base = f"_{base}"
    full = f"{prefix}{base}"
    if len(full) <= IDENTIFIER_MAX:
        return full
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:10]
    keep = IDENTIFIER_MAX - len(prefix) - len(digest) - 1
    return f"{prefix}{base[:keep]}_{digest}"


def build_role_labels(spec: ButlerSpec) -> dict[str, str]:
    """The pod's role: how NetworkPolicies find the switchboard (the same rule as discovery)."""
    return {ROLE_LABEL: SWITCHBOARD_ROLE} if spec.is_switchboard else {}


def build_labels(target: ButlerTarget) -> dict[str, str]:
    return {
        APP_LABEL: APP,
        "app.kubernetes.io/instance": target.name,
        "app.kubernetes.io/part-of": "butlers",
        "app.kubernetes.io/managed-by": "butlers-operator",
        BUTLER_LABEL: target.name,
        **build_role_labels(target.spec),
    }


def build_selector(target: ButlerTarget) -> dict[str, str]:
    return {APP_LABEL: APP, BUTLER_LABEL: target.name}


def build_owner_reference(target: ButlerTarget) -> dict[str, Any]:
    return {
        "apiVersion": FULL_API_VERSION,
        "kind": KIND,
        "name": target.name,
        "uid": target.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def build_metadata(target: ButlerTarget, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": target.namespace,
        "labels": build_labels(target),
        "ownerReferences": [build_owner_reference(target)],
    }
