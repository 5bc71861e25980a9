"""The operator's settings: built once at start-up from `BUTLERS_OPERATOR_*` and passed down.

This is the only module of the operator that reads environment variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_IMAGE = "ghcr.io/butlers-dev/butler:0.1.0"


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class OperatorSettings:
    """Everything the operator needs to know about its environment."""

    # Where to watch: some namespaces, or every namespace.
    namespaces: tuple[str, ...] = ()
    cluster_wide: bool = False
    # The operator's own namespace (its pods are allowed into every butler).
    operator_namespace: str = "butlers-system"
    # The PostgreSQL admin connection: a Secret (key `dsn`) in the operator's namespace,
    # read at each reconcile so a rotation takes effect, or a DSN given directly.
    admin_secret: str | None = None
    admin_dsn: str | None = None
    # The server as butler pods reach it, when it differs from the admin DSN's host.
    butler_database_host: str | None = None
    schema_prefix: str = ""
    butler_image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    # A Secret in each Butler's namespace whose keys every butler container gets as
    # environment variables (optional: absent means nothing). The spec does not declare
    # them, so LLM sessions never see them (e.g. a proxy setting, or the e2e runtime).
    butler_env_secret: str | None = None
    # NetworkPolicy: who may call a butler's MCP port, where butlers may connect to.
    switchboard: str = "switchboard"
    dashboard_labels: Mapping[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/name": "butlers-dashboard"}
    )
    operator_labels: Mapping[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/name": "butlers-operator"}
    )
    database_cidr: str = "0.0.0.0/0"
    model_cidr: str = "0.0.0.0/0"
    model_ports: tuple[int, ...] = (443,)
    # Reconciliation: drift correction interval and retry backoff.
    resync_seconds: float = 60.0
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 300.0
    # Only for development and tests: the API server URL, without in-cluster credentials.
    kube_server: str | None = None
    # Where kopf serves the liveness probe (the chart's `health` port).
    liveness_endpoint: str = "http://0.0.0.0:8080/healthz"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        env = os.environ if environ is None else environ
        get = env.get
        defaults = cls()
        return cls(
            namespaces=_split(get("BUTLERS_OPERATOR_NAMESPACES")),
            cluster_wide=_truthy(get("BUTLERS_OPERATOR_CLUSTER_WIDE")),
            operator_namespace=get("BUTLERS_OPERATOR_NAMESPACE") or defaults.operator_namespace,
            admin_secret=get("BUTLERS_OPERATOR_ADMIN_SECRET") or None,
            admin_dsn=get("BUTLERS_OPERATOR_ADMIN_DSN") or None,
            butler_database_host=get("BUTLERS_OPERATOR_BUTLER_DATABASE_HOST") or None,
            schema_prefix=get("BUTLERS_OPERATOR_SCHEMA_PREFIX", ""),
            butler_image=get("BUTLERS_OPERATOR_BUTLER_IMAGE") or defaults.butler_image,
            image_pull_policy=get("BUTLERS_OPERATOR_IMAGE_PULL_POLICY")
            or defaults.image_pull_policy,
            butler_env_secret=get("BUTLERS_OPERATOR_BUTLER_ENV_SECRET") or None,
            switchboard=get("BUTLERS_OPERATOR_SWITCHBOARD") or defaults.switchboard,
            database_cidr=get("BUTLERS_OPERATOR_DATABASE_CIDR") or defaults.database_cidr,
            model_cidr=get("BUTLERS_OPERATOR_MODEL_CIDR") or defaults.model_cidr,
            model_ports=tuple(int(p) for p in _split(get("BUTLERS_OPERATOR_MODEL_PORTS")))
            or defaults.model_ports,
            resync_seconds=float(get("BUTLERS_OPERATOR_RESYNC_SECONDS") or 60),
            retry_base_seconds=float(get("BUTLERS_OPERATOR_RETRY_BASE_SECONDS") or 5),
            retry_max_seconds=float(get("BUTLERS_OPERATOR_RETRY_MAX_SECONDS") or 300),
            kube_server=get("BUTLERS_OPERATOR_KUBE_SERVER") or None,
            liveness_endpoint=get("BUTLERS_OPERATOR_LIVENESS_ENDPOINT")
            or defaults.liveness_endpoint,
        )

    def retry_delay(self, retry: int) -> float:
        """Exponential backoff: base, 2 * base, 4 * base, ... capped."""
        return float(min(self.retry_base_seconds * (2 ** max(retry, 0)), self.retry_max_seconds))
