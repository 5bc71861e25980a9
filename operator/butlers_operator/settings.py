"""The operator's settings: built once at start-up from `BUTLERS_OPERATOR_*` and passed down.

This is the only module of the operator that reads environment variables. Structured
settings (the NetworkPolicy's peers, pod defaults) arrive as JSON, which the chart
writes with `toJson`; a bad value stops the operator with a message naming it.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from butlers.db.readers import dashboard_role, dashboard_schema

DEFAULT_IMAGE = "ghcr.io/butlers-dev/butler:0.1.0"
ANYWHERE = ("0.0.0.0/0", "::/0")
LIVENESS_PORT = 8080

Port = Annotated[int, Field(ge=1, le=65535)]
Peer = dict[str, JsonValue]  # a NetworkPolicyPeer: podSelector / namespaceSelector


class SettingsError(ValueError):
    """A `BUTLERS_OPERATOR_*` variable holds a value the operator cannot use."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class EgressTarget(_Model):
    """Where a flow may go: address blocks (IPv4 and IPv6) and/or in-cluster peers."""

    cidrs: tuple[str, ...] = ()
    # podSelector/namespaceSelector peers: an in-cluster server. Cilium and others
    # never match pod IPs with ipBlock, so an in-cluster server needs one of these.
    peers: tuple[Peer, ...] = ()
    ports: tuple[Port, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.cidrs or self.peers)


class NetworkPolicySettings(_Model):
    """What each butler's NetworkPolicy admits (`networkPolicy` in the chart's values)."""

    enabled: bool = True
    # PostgreSQL; ports default to the admin DSN's port.
    database: EgressTarget = EgressTarget(cidrs=ANYWHERE)
    # The model API (hosted: any address on 443), and an in-cluster OpenAI-compatible server.
    model: EgressTarget = EgressTarget(cidrs=ANYWHERE, ports=(443,))
    in_cluster_model: EgressTarget = EgressTarget()
    # An OpenTelemetry collector, when butlers export spans (ports: the endpoint's).
    otlp: EgressTarget = EgressTarget()
    # SMTP/IMAP servers and the Telegram Bot API, for butlers that enable those modules;
    # ports come from each module's config.
    channels: EgressTarget = EgressTarget(cidrs=ANYWHERE)
    # Raw NetworkPolicy rules appended to every butler's policy.
    extra_egress: tuple[dict[str, JsonValue], ...] = ()
    extra_ingress: tuple[dict[str, JsonValue], ...] = ()
    dashboard_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "butlers-dashboard"}
    )
    operator_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "butlers-operator"}
    )


class PodDefaults(_Model):
    """Pod settings for every butler unless its `spec.pod` sets them (chart `butlerPod`)."""

    image_pull_secrets: tuple[str, ...] = ()
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[dict[str, JsonValue], ...] = ()
    affinity: dict[str, JsonValue] | None = None
    priority_class_name: str | None = None
    # The pods' UID and GID; None leaves them to the platform (OpenShift restricted-v2).
    run_as_user: Annotated[int, Field(ge=1)] | None = 10001


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _json_model(env: Mapping[str, str], name: str, model: type[_Model]) -> Any:
    raw = env.get(name)
    if not raw:
        return model()
    try:
        return model.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise SettingsError(f"{name}: {exc}") from None


def _served_at(pod_ip: str | None, port: int, path: str) -> str:
    """Where the operator serves probes and metrics: its pod's address family (aiohttp
    listens on one family; `[::]` would not take IPv4 probes)."""
    host = "[::]" if pod_ip and ":" in pod_ip else "0.0.0.0"
    return f"http://{host}:{port}{path}"


def _port(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if not raw:
        return None
    try:
        port = int(raw)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise SettingsError(f"{name}: {raw!r} is not a port")
    return port


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise SettingsError(f"{name}: {raw!r} is not a number") from None


@dataclass(frozen=True)
class OperatorSettings:
    """Everything the operator needs to know about its environment."""

    # Where to watch: some namespaces, or every namespace.
    namespaces: tuple[str, ...] = ()
    cluster_wide: bool = False
    # The operator's own namespace (its pods are allowed into every butler).
    operator_namespace: str = "butlers-system"
    # The PostgreSQL admin connection: a Secret in the operator's namespace, read at
    # each reconcile so a rotation takes effect (key `admin_secret_key` holds a DSN, or
    # the keys host/port/user/password/dbname do, as a CloudNativePG Secret has them);
    # or a DSN given directly.
    admin_secret: str | None = None
    admin_secret_key: str = "dsn"
    # What the admin Secret does not hold (host, port, user, dbname), e.g. a Secret that
    # has only the password.
    admin_defaults: Mapping[str, str] = field(default_factory=dict)
    admin_dsn: str | None = None
    # The server as butler pods reach it, when it differs from the admin DSN's host.
    butler_database_host: str | None = None
    schema_prefix: str = ""
    butler_image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    # Whether the default butler image ships the `claude` CLI (the claude-code runtime).
    image_has_claude_code: bool = False
    # A Secret in each Butler's namespace whose keys every butler container gets as
    # environment variables (optional: absent means nothing). The spec does not declare
    # them, so LLM sessions never see them (e.g. a proxy setting, or the e2e runtime).
    butler_env_secret: str | None = None
    # An OTLP/HTTP endpoint every butler exports spans to (BUTLERS_OTLP_ENDPOINT).
    otlp_endpoint: str | None = None
    # The Secret that receives the dashboard's database credentials, in the dashboard's
    # namespace (default: the operator's); None: no dashboard, no dashboard role.
    dashboard_secret: str | None = None
    dashboard_namespace: str | None = None
    # The dashboard's login role and its own schema (roles are server-wide, so each
    # release names its own; the chart derives them from the release name). Unset: the
    # schema prefix's `<prefix>butlers_dashboard` and `<prefix>dashboard`.
    dashboard_role_name: str | None = None
    dashboard_schema_name: str | None = None
    # The Secret (in the dashboard's namespace) holding the dashboard's bearer token under
    # `token`: the operator creates it with a generated token when it is missing, so a
    # renderer without cluster access (`helm template`, Argo CD) needs no token.
    dashboard_token_secret: str | None = None
    network_policy: NetworkPolicySettings = field(default_factory=NetworkPolicySettings)
    pod_defaults: PodDefaults = field(default_factory=PodDefaults)
    # Reconciliation: drift correction interval and retry backoff.
    resync_seconds: float = 60.0
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 300.0
    # How long to wait at start-up for the Butler CRD before exiting non-zero.
    crd_wait_seconds: float = 60.0
    # Only for development and tests: the API server URL, without in-cluster credentials.
    kube_server: str | None = None
    # Where `/metrics` is served (None: nowhere), and the Secret holding its bearer token.
    metrics_endpoint: str | None = None
    metrics_secret: str | None = None
    # Leader election: the Lease in the operator's namespace that only one replica holds
    # (None: no election, this process acts alone), and who this replica is.
    lease_name: str | None = None
    identity: str = ""
    # Where kopf serves the liveness probe (the chart's `health` port).
    liveness_endpoint: str = "http://0.0.0.0:8080/healthz"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        env = os.environ if environ is None else environ
        get = env.get
        defaults = cls()
        settings = cls(
            namespaces=_split(get("BUTLERS_OPERATOR_NAMESPACES")),
            cluster_wide=_truthy(get("BUTLERS_OPERATOR_CLUSTER_WIDE")),
            operator_namespace=get("BUTLERS_OPERATOR_NAMESPACE") or defaults.operator_namespace,
            admin_secret=get("BUTLERS_OPERATOR_ADMIN_SECRET") or None,
            admin_secret_key=get("BUTLERS_OPERATOR_ADMIN_SECRET_KEY") or defaults.admin_secret_key,
            admin_defaults={
                key: value
                for key, name in (
                    ("host", "HOST"),
                    ("port", "PORT"),
                    ("user", "USER"),
                    ("dbname", "DATABASE"),
                )
                if (value := get(f"BUTLERS_OPERATOR_ADMIN_{name}"))
            },
            admin_dsn=get("BUTLERS_OPERATOR_ADMIN_DSN") or None,
            butler_database_host=get("BUTLERS_OPERATOR_BUTLER_DATABASE_HOST") or None,
            schema_prefix=get("BUTLERS_OPERATOR_SCHEMA_PREFIX", ""),
            butler_image=get("BUTLERS_OPERATOR_BUTLER_IMAGE") or defaults.butler_image,
            image_pull_policy=get("BUTLERS_OPERATOR_IMAGE_PULL_POLICY")
            or defaults.image_pull_policy,
            image_has_claude_code=_truthy(get("BUTLERS_OPERATOR_IMAGE_HAS_CLAUDE_CODE")),
            butler_env_secret=get("BUTLERS_OPERATOR_BUTLER_ENV_SECRET") or None,
            otlp_endpoint=get("BUTLERS_OPERATOR_OTLP_ENDPOINT") or None,
            dashboard_secret=get("BUTLERS_OPERATOR_DASHBOARD_SECRET") or None,
            dashboard_namespace=get("BUTLERS_OPERATOR_DASHBOARD_NAMESPACE") or None,
            dashboard_role_name=get("BUTLERS_OPERATOR_DASHBOARD_ROLE") or None,
            dashboard_schema_name=get("BUTLERS_OPERATOR_DASHBOARD_SCHEMA") or None,
            dashboard_token_secret=get("BUTLERS_OPERATOR_DASHBOARD_TOKEN_SECRET") or None,
            network_policy=_json_model(
                env, "BUTLERS_OPERATOR_NETWORK_POLICY", NetworkPolicySettings
            ),
            pod_defaults=_json_model(env, "BUTLERS_OPERATOR_POD_DEFAULTS", PodDefaults),
            resync_seconds=_number(env, "BUTLERS_OPERATOR_RESYNC_SECONDS", 60),
            retry_base_seconds=_number(env, "BUTLERS_OPERATOR_RETRY_BASE_SECONDS", 5),
            retry_max_seconds=_number(env, "BUTLERS_OPERATOR_RETRY_MAX_SECONDS", 300),
            crd_wait_seconds=_number(env, "BUTLERS_OPERATOR_CRD_WAIT_SECONDS", 60),
            kube_server=get("BUTLERS_OPERATOR_KUBE_SERVER") or None,
            liveness_endpoint=get("BUTLERS_OPERATOR_LIVENESS_ENDPOINT")
            or _served_at(get("BUTLERS_OPERATOR_POD_IP"), LIVENESS_PORT, "/healthz"),
            metrics_endpoint=get("BUTLERS_OPERATOR_METRICS_ENDPOINT")
            or (
                _served_at(get("BUTLERS_OPERATOR_POD_IP"), metrics_port, "/metrics")
                if (metrics_port := _port(env, "BUTLERS_OPERATOR_METRICS_PORT"))
                else None
            ),
            metrics_secret=get("BUTLERS_OPERATOR_METRICS_SECRET") or "butlers-operator-metrics",
            lease_name=get("BUTLERS_OPERATOR_LEASE") or None,
            identity=get("BUTLERS_OPERATOR_POD_NAME") or socket.gethostname(),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse combinations that would silently break something."""
        network = self.network_policy
        if self.otlp_endpoint and network.enabled and not network.otlp.configured:
            raise SettingsError(
                "BUTLERS_OPERATOR_OTLP_ENDPOINT is set but the NetworkPolicy allows no "
                "collector (networkPolicy.otlp has no cidrs or peers), so every span would "
                "be dropped: set networkPolicy.otlp.peers (the collector's pods) or cidrs"
            )

    @property
    def dashboard_role(self) -> str:
        return self.dashboard_role_name or dashboard_role(self.schema_prefix)

    @property
    def dashboard_schema(self) -> str:
        return self.dashboard_schema_name or dashboard_schema(self.schema_prefix)

    def retry_delay(self, retry: int) -> float:
        """Exponential backoff: base, 2 * base, 4 * base, ... capped."""
        return float(min(self.retry_base_seconds * (2 ** max(retry, 0)), self.retry_max_seconds))

    def serves(self, namespace: str) -> bool:
        return self.cluster_wide or namespace in self.namespaces
