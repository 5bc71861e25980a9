"""Pure rendering of a Butler into the Kubernetes objects that run it.

Every function here is a pure function of its arguments: no I/O, no clock, no
randomness. The reconciler applies what these return, `python -m butlers_operator
render` prints them, and the unit tests validate them against the Kubernetes OpenAPI
schemas of every supported version.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from butlers.db.provision import Credentials
from butlers.spec import FULL_API_VERSION, KIND, EnvVarSpec
from butlers_operator.auth import AuthInputs, build_auth_env, render_auth_secret
from butlers_operator.netpol import render_network_policy
from butlers_operator.prune import POD_METADATA_ANNOTATION, build_pod_metadata_record
from butlers_operator.settings import OperatorSettings
from butlers_operator.target import (
    ButlerTarget,
    build_labels,
    build_metadata,
    build_selector,
)

SPEC_DIR = "/etc/butlers"
SPEC_FILE = "butler.yaml"
SPEC_PATH = f"{SPEC_DIR}/{SPEC_FILE}"
CONFIG_HASH_ANNOTATION = "butlers.dev/config-hash"
CONTAINER = "butler"
MIGRATE_CONTAINER = "migrate"
SPEC_VOLUME = "butlers-spec"
TMP_VOLUME = "butlers-tmp"
# The butler image's user; the chart's runAsUser (null: none) overrides it.
RUN_AS = 10001
DEFAULT_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"memory": "512Mi"},
}
# Above /ready's own 2 s database check (butlers.daemon.serve.READY_TIMEOUT), so a
# slow-but-healthy answer is not taken for a failure.
READINESS_TIMEOUT_SECONDS = 5
# Start-up may take a while on a busy node (imports, first connection): up to 3 minutes
# before liveness takes over.
STARTUP_PERIOD_SECONDS = 2
STARTUP_FAILURES = 90
# A placeholder the `render` command shows instead of a password it does not know.
PASSWORD_PLACEHOLDER = "generated-at-provisioning"


@dataclass(frozen=True)
class PodInputs:
    """What a pod consumes beyond the Butler itself, for the config hash (never stored)."""

    # Each referenced Secret/ConfigMap → its data as the reconciler read it (None: missing).
    secrets: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)
    config_maps: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def build_butler_dsn(credentials: Credentials, server_dsn: str, host: str | None) -> str:
    """The butler role's DSN (escaped), with the host as butler pods reach the server."""
    dsn = credentials.dsn(server_dsn)
    if not host:
        return dsn
    parts = urlsplit(dsn)
    userinfo = parts.netloc.rsplit("@", 1)[0]
    port = f":{parts.port}" if parts.port else ""
    bracketed = f"[{host}]" if ":" in host else host
    return str(
        urlunsplit((parts.scheme, f"{userinfo}@{bracketed}{port}", parts.path, parts.query, ""))
    )


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
        "metadata": build_metadata(target, target.secret_name),
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
        "metadata": build_metadata(target, target.config_map_name),
        "data": {SPEC_FILE: render_spec_file(target)},
    }


@dataclass(frozen=True)
class InputRefs:
    """The Secrets and ConfigMaps the butler container's environment comes from.

    Name → the keys it reads, or None for all of them (`envFrom`).
    """

    secrets: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    config_maps: Mapping[str, frozenset[str] | None] = field(default_factory=dict)


def referenced_inputs(target: ButlerTarget, settings: OperatorSettings) -> InputRefs:
    """What must roll the pod when it changes, besides the spec and the butler's Secret."""
    secrets: dict[str, frozenset[str] | None] = {}
    config_maps: dict[str, frozenset[str] | None] = {}

    def add(table: dict[str, frozenset[str] | None], name: str, key: str | None) -> None:
        if name in table and table[name] is None:
            return
        table[name] = None if key is None else (table.get(name) or frozenset()) | {key}

    if settings.butler_env_secret:
        add(secrets, settings.butler_env_secret, None)
    if target.spec.runtime.credentials_secret:
        add(secrets, target.spec.runtime.credentials_secret, None)
    for var in target.spec.env:
        if var.secret_key_ref is not None:
            add(secrets, var.secret_key_ref.name, var.secret_key_ref.key)
    for pod_var in target.spec.pod.env:
        source = pod_var.value_from or {}
        for kind, table in (("secretKeyRef", secrets), ("configMapKeyRef", config_maps)):
            ref = source.get(kind)
            if isinstance(ref, dict) and isinstance(ref.get("name"), str):
                add(table, str(ref["name"]), str(ref.get("key", "")))
    return InputRefs(secrets=secrets, config_maps=config_maps)


def build_config_hash(
    config_map: dict[str, Any],
    secret: dict[str, Any],
    inputs: PodInputs | None = None,
    auth_secret: dict[str, Any] | None = None,
) -> str:
    """A digest of everything a pod reads at start: a change rolls the pod.

    The spec, the butler's own Secrets (database, tokens), and every Secret and ConfigMap
    its environment comes from (runtime credentials, secretKeyRefs, the site-wide env
    Secret).
    """
    inputs = inputs or PodInputs()
    payload = json.dumps(
        {
            "config": config_map.get("data", {}),
            "secret": secret.get("data", {}),
            "auth": (auth_secret or {}).get("data", {}),
            "secrets": inputs.secrets,
            "configMaps": inputs.config_maps,
        },
        sort_keys=True,
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


def uses_claude_code(target: ButlerTarget) -> bool:
    return target.spec.runtime.adapter == "claude-code"


def build_migrate_env(target: ButlerTarget, settings: OperatorSettings) -> list[dict[str, Any]]:
    """The migrate container's: its own role, and the dashboard's role to grant reads to."""
    env = build_butler_env(target, settings, None)[:2]
    if settings.dashboard_secret:
        env.append({"name": "BUTLERS_DASHBOARD_ROLE", "value": settings.dashboard_role})
    return env


def build_butler_env(
    target: ButlerTarget, settings: OperatorSettings, switchboard_url: str | None
) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        _secret_env(target, "BUTLERS_DSN", "dsn"),
        _secret_env(target, "BUTLERS_SCHEMA", "schema"),
        # Every address of both families: IPv4, dual-stack and IPv6-only clusters alike.
        {"name": "BUTLERS_HOST", "value": "::"},
        {"name": "BUTLERS_PORT", "value": str(target.spec.port)},
        *build_auth_env(target),
        *(
            {"name": name, "value": value}
            for name, value in target.spec.database.pool.environment().items()
        ),
    ]
    if switchboard_url:
        env.append({"name": "BUTLERS_SWITCHBOARD_URL", "value": switchboard_url})
        env.append({"name": "BUTLERS_ADVERTISE_URL", "value": target.endpoint})
    if settings.otlp_endpoint:
        env.append({"name": "BUTLERS_OTLP_ENDPOINT", "value": settings.otlp_endpoint})
    if uses_claude_code(target):
        # The CLI keeps its state under HOME: the pod's writable emptyDir.
        env.append({"name": "HOME", "value": "/tmp"})
    env.extend(_env_var(var) for var in target.spec.env)
    for var in target.spec.pod.env:
        if var.value_from is not None:
            env.append({"name": var.name, "valueFrom": var.value_from})
        else:
            env.append({"name": var.name, "value": var.value or ""})
    return env


def _probes(port: str) -> dict[str, Any]:
    return {
        "startupProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": STARTUP_PERIOD_SECONDS,
            "timeoutSeconds": 2,
            "failureThreshold": STARTUP_FAILURES,
        },
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": port},
            "periodSeconds": 5,
            "timeoutSeconds": READINESS_TIMEOUT_SECONDS,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
    }


def _pod_security(settings: OperatorSettings) -> dict[str, Any]:
    """Non-root with a fixed UID, unless the platform assigns one (`runAsUser: null`)."""
    security: dict[str, Any] = {"runAsNonRoot": True}
    uid = settings.pod_defaults.run_as_user
    if uid is not None:
        security |= {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid}
    return security | {"seccompProfile": {"type": "RuntimeDefault"}}


def _scheduling(target: ButlerTarget, settings: OperatorSettings) -> dict[str, Any]:
    """Pod placement and pulls: the Butler's `spec.pod`, else the operator's defaults."""
    pod, defaults = target.spec.pod, settings.pod_defaults
    out: dict[str, Any] = {}
    pull_secrets = pod.image_pull_secrets or list(defaults.image_pull_secrets)
    if pull_secrets:
        out["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
    node_selector = pod.node_selector or defaults.node_selector
    if node_selector:
        out["nodeSelector"] = dict(node_selector)
    tolerations = pod.tolerations or list(defaults.tolerations)
    if tolerations:
        out["tolerations"] = [dict(t) for t in tolerations]
    affinity = pod.affinity if pod.affinity is not None else defaults.affinity
    if affinity:
        out["affinity"] = dict(affinity)
    priority = pod.priority_class_name or defaults.priority_class_name
    if priority:
        out["priorityClassName"] = priority
    return out


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
    mounts = [
        {"name": SPEC_VOLUME, "mountPath": SPEC_DIR, "readOnly": True},
        {"name": TMP_VOLUME, "mountPath": "/tmp"},
    ]
    env_from: list[dict[str, Any]] = []
    if settings.butler_env_secret:
        env_from.append({"secretRef": {"name": settings.butler_env_secret, "optional": True}})
    if target.spec.runtime.credentials_secret:
        env_from.append({"secretRef": {"name": target.spec.runtime.credentials_secret}})
    butler: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["butlers"],
        "args": ["serve", "--spec", SPEC_PATH],
        "env": build_butler_env(target, settings, switchboard_url),
        "ports": [{"name": "mcp", "containerPort": target.spec.port, "protocol": "TCP"}],
        **_probes("mcp"),
        "resources": _resources(target),
        "securityContext": security,
        "volumeMounts": [*mounts, *(dict(m) for m in target.spec.pod.volume_mounts)],
    }
    if env_from:
        butler["envFrom"] = env_from
    migrate = {
        "name": MIGRATE_CONTAINER,
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["butlers"],
        "args": ["migrate", "--spec", SPEC_PATH],
        "env": build_migrate_env(target, settings),
        # The butler's own: a namespace's ResourceQuota or LimitRange judges every
        # container, so `spec.resources` (a CPU limit, say) must reach this one too.
        "resources": _resources(target),
        "securityContext": security,
        "volumeMounts": mounts,
    }
    # The operator's labels win: the selector and the NetworkPolicies depend on them.
    labels = dict(target.spec.pod.labels) | build_labels(target)
    annotations = dict(target.spec.pod.annotations) | {CONFIG_HASH_ANNOTATION: config_hash}
    metadata = build_metadata(target, target.name)
    # What spec.pod put on the pod, so that taking a key out removes it (prune.py).
    metadata["annotations"] = {
        POD_METADATA_ANNOTATION: build_pod_metadata_record(
            target.spec.pod.labels, target.spec.pod.annotations
        )
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": build_selector(target)},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "serviceAccountName": target.name,
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": _pod_security(settings),
                    **_scheduling(target, settings),
                    "initContainers": [migrate],
                    "containers": [butler],
                    "volumes": [
                        {"name": SPEC_VOLUME, "configMap": {"name": target.config_map_name}},
                        {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}},
                        *(dict(v) for v in target.spec.pod.volumes),
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
        "metadata": build_metadata(target, target.name),
        "spec": {"type": "ClusterIP", "selector": build_selector(target), "ports": [port]},
    }


def render_service_account(target: ButlerTarget) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": build_metadata(target, target.name),
        "automountServiceAccountToken": False,
    }


def render_all(
    target: ButlerTarget,
    settings: OperatorSettings,
    credentials: Credentials,
    dsn: str,
    database_port: int,
    switchboard_url: str | None = None,
    inputs: PodInputs | None = None,
    *,
    auth: AuthInputs,
) -> list[dict[str, Any]]:
    """Every object of one Butler, in the order they are applied."""
    secret = render_secret(target, credentials, dsn)
    auth_secret = render_auth_secret(target, auth)
    config_map = render_config_map(target)
    config_hash = build_config_hash(config_map, secret, inputs, auth_secret)
    objects = [
        render_service_account(target),
        secret,
        auth_secret,
        config_map,
        render_deployment(target, settings, config_hash, switchboard_url),
        render_service(target),
    ]
    if settings.network_policy.enabled:
        objects.append(render_network_policy(target, settings, database_port))
    return objects
