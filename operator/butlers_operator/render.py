"""Pure rendering of a Butler into the Kubernetes objects that run it.

Every function here is a pure function of its arguments: no I/O, no clock, no
randomness. The reconciler applies what these return; the unit tests validate
them against the Kubernetes OpenAPI schemas of every supported version.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import yaml

from butlers.db.provision import Credentials
from butlers.spec import FULL_API_VERSION, KIND, ButlerSpec, EnvVarSpec
from butlers_operator.settings import OperatorSettings

SPEC_DIR = "/etc/butlers"
SPEC_FILE = "butler.yaml"
SPEC_PATH = f"{SPEC_DIR}/{SPEC_FILE}"
CONFIG_HASH_ANNOTATION = "butlers.dev/config-hash"
BUTLER_LABEL = "butlers.dev/butler"
CONTAINER = "butler"
MIGRATE_CONTAINER = "migrate"
RUN_AS = 10001
DEFAULT_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"memory": "512Mi"},
}


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


def build_endpoint(name: str, namespace: str, port: int) -> str:
    """A butler's in-cluster MCP URL: its Service's DNS name and port."""
    return f"http://{name}.{namespace}.svc:{port}/mcp"


def build_labels(target: ButlerTarget) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "butler",
        "app.kubernetes.io/instance": target.name,
        "app.kubernetes.io/part-of": "butlers",
        "app.kubernetes.io/managed-by": "butlers-operator",
        BUTLER_LABEL: target.name,
    }


def build_selector(target: ButlerTarget) -> dict[str, str]:
    return {"app.kubernetes.io/name": "butler", BUTLER_LABEL: target.name}


def build_owner_reference(target: ButlerTarget) -> dict[str, Any]:
    return {
        "apiVersion": FULL_API_VERSION,
        "kind": KIND,
        "name": target.name,
        "uid": target.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(target: ButlerTarget, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": target.namespace,
        "labels": build_labels(target),
        "ownerReferences": [build_owner_reference(target)],
    }


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def build_butler_dsn(credentials: Credentials, server_dsn: str, host: str | None) -> str:
    """The butler role's DSN, with the host as butler pods reach the server."""
    dsn = credentials.dsn(server_dsn)
    if not host:
        return dsn
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    userinfo = parts.netloc.rsplit("@", 1)[0]
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{userinfo}@{host}{port}", parts.path, parts.query, ""))


def render_secret(target: ButlerTarget, credentials: Credentials, dsn: str) -> dict[str, Any]:
    """The butler's database credentials (its own role, never the admin's)."""
    values = {
        "dsn": dsn,
        "schema": credentials.schema,
        "role": credentials.role,
        "password": credentials.password,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(target, target.secret_name),
        "type": "Opaque",
        "data": {key: _b64(value) for key, value in values.items()},
    }


def render_spec_file(target: ButlerTarget) -> str:
    """The Butler YAML file that `butlers serve --spec` and `butlers migrate --spec` read."""
    document = {
        "apiVersion": FULL_API_VERSION,
        "kind": KIND,
        "metadata": {"name": target.name, "namespace": target.namespace},
        "spec": target.spec.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
    }
    return yaml.safe_dump(document, sort_keys=False)


def render_config_map(target: ButlerTarget) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(target, target.config_map_name),
        "data": {SPEC_FILE: render_spec_file(target)},
    }


def build_config_hash(config_map: dict[str, Any], secret: dict[str, Any]) -> str:
    """A digest of everything a pod reads at start: a change rolls the pod."""
    payload = json.dumps(
        {"config": config_map.get("data", {}), "secret": secret.get("data", {})}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _env_var(var: EnvVarSpec) -> dict[str, Any]:
    if var.secret_key_ref is not None:
        ref = {"name": var.secret_key_ref.name, "key": var.secret_key_ref.key}
        return {"name": var.name, "valueFrom": {"secretKeyRef": ref}}
    return {"name": var.name, "value": var.value or ""}


def _secret_env(target: ButlerTarget, name: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": target.secret_name, "key": key}}}


def _resources(target: ButlerTarget) -> dict[str, Any]:
    spec = target.spec.resources
    if spec is None:
        return DEFAULT_RESOURCES
    out: dict[str, Any] = {}
    for part in ("requests", "limits"):
        values = getattr(spec, part)
        if values is not None:
            dumped = values.model_dump(exclude_none=True)
            if dumped:
                out[part] = dumped
    return out or DEFAULT_RESOURCES


def render_deployment(
    target: ButlerTarget,
    settings: OperatorSettings,
    config_hash: str,
    switchboard_url: str | None = None,
) -> dict[str, Any]:
    """One replica, recreated (never two sessions of one butler), migrations first.

    With a `switchboard_url`, the butler registers there under its Service URL.
    """
    image = target.spec.image or settings.butler_image
    security = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    database_env = [
        _secret_env(target, "BUTLERS_DSN", "dsn"),
        _secret_env(target, "BUTLERS_SCHEMA", "schema"),
    ]
    mounts = [
        {"name": "spec", "mountPath": SPEC_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    env_from: list[dict[str, Any]] = []
    if settings.butler_env_secret:
        env_from.append({"secretRef": {"name": settings.butler_env_secret, "optional": True}})
    if target.spec.runtime.credentials_secret:
        env_from.append({"secretRef": {"name": target.spec.runtime.credentials_secret}})
    probe = {"port": "mcp"}
    butler = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["butlers"],
        "args": ["serve", "--spec", SPEC_PATH],
        "env": [
            *database_env,
            {"name": "BUTLERS_HOST", "value": "0.0.0.0"},
            {"name": "BUTLERS_PORT", "value": str(target.spec.port)},
            *(
                [
                    {"name": "BUTLERS_SWITCHBOARD_URL", "value": switchboard_url},
                    {"name": "BUTLERS_ADVERTISE_URL", "value": target.endpoint},
                ]
                if switchboard_url
                else []
            ),
            *(_env_var(var) for var in target.spec.env),
        ],
        "ports": [{"name": "mcp", "containerPort": target.spec.port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/ready", **probe},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", **probe},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "resources": _resources(target),
        "securityContext": security,
        "volumeMounts": mounts,
    }
    if env_from:
        butler["envFrom"] = env_from
    migrate = {
        "name": MIGRATE_CONTAINER,
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["butlers"],
        "args": ["migrate", "--spec", SPEC_PATH],
        "env": database_env,
        "resources": DEFAULT_RESOURCES,
        "securityContext": security,
        "volumeMounts": mounts,
    }
    labels = build_labels(target)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(target, target.name),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": build_selector(target)},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash},
                },
                "spec": {
                    "serviceAccountName": target.name,
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "initContainers": [migrate],
                    "containers": [butler],
                    "volumes": [
                        {"name": "spec", "configMap": {"name": target.config_map_name}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def render_service(target: ButlerTarget) -> dict[str, Any]:
    port = {"name": "mcp", "port": target.spec.port, "targetPort": "mcp", "protocol": "TCP"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(target, target.name),
        "spec": {"type": "ClusterIP", "selector": build_selector(target), "ports": [port]},
    }


def render_service_account(target: ButlerTarget) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(target, target.name),
        "automountServiceAccountToken": False,
    }


def render_network_policy(
    target: ButlerTarget, settings: OperatorSettings, database_port: int
) -> dict[str, Any]:
    """MCP only from the switchboard, the dashboard and the operator; egress to what it needs."""
    operator_peer = {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": settings.operator_namespace}
        },
        "podSelector": {"matchLabels": dict(settings.operator_labels)},
    }
    peers = [
        {"podSelector": {"matchLabels": {BUTLER_LABEL: settings.switchboard}}},
        {"podSelector": {"matchLabels": dict(settings.dashboard_labels)}},
        operator_peer,
    ]
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    egress = [
        {"ports": dns_ports},
        {
            "to": [{"ipBlock": {"cidr": settings.database_cidr}}],
            "ports": [{"protocol": "TCP", "port": database_port}],
        },
        {
            "to": [{"ipBlock": {"cidr": settings.model_cidr}}],
            "ports": [{"protocol": "TCP", "port": port} for port in settings.model_ports],
        },
    ]
    if target.name == settings.switchboard:
        # The switchboard dispatches to every butler's MCP port in its namespace.
        egress.append(
            {"to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "butler"}}}]}
        )
    else:
        # Every butler registers with the switchboard and keeps a heartbeat.
        egress.append(
            {"to": [{"podSelector": {"matchLabels": {BUTLER_LABEL: settings.switchboard}}}]}
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(target, target.name),
        "spec": {
            "podSelector": {"matchLabels": build_selector(target)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": target.spec.port}]}],
            "egress": egress,
        },
    }


def render_all(
    target: ButlerTarget,
    settings: OperatorSettings,
    credentials: Credentials,
    dsn: str,
    database_port: int,
    switchboard_url: str | None = None,
) -> list[dict[str, Any]]:
    """Every object of one Butler, in the order they are applied."""
    secret = render_secret(target, credentials, dsn)
    config_map = render_config_map(target)
    config_hash = build_config_hash(config_map, secret)
    return [
        render_service_account(target),
        secret,
        config_map,
        render_deployment(target, settings, config_hash, switchboard_url),
        render_service(target),
        render_network_policy(target, settings, database_port),
    ]
