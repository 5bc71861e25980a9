"""The dashboard as the chart runs it, for the backends without a real control plane.

The `operator` backend has no helm: it renders `charts/butlers` offline and runs the
dashboard's Deployment from that rendering (same command, args and environment as in
a cluster), next to the pods the operator rendered. The chart also names the Secret
the operator must write the dashboard's database credentials to. Both cluster
backends give the dashboard the same extra environment: where the API server is,
and a forward proxy that stands in for cluster DNS (`tests/support/forward_proxy.py`),
since the dashboard learns each butler's Service URL from the API at run time.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parents[3] / "charts" / "butlers"
RELEASE = "butlers"
DASHBOARD_LABEL = "butlers-dashboard"
# How quickly a new Butler shows: the local backend's dashboard uses the same interval.
DISCOVERY_INTERVAL = "0.25"


def new_dashboard_token() -> str:
    return secrets.token_urlsafe(24)


def build_dashboard_env(
    proxy_url: str, no_proxy: list[str], kube_api: str | None = None
) -> list[dict[str, str]]:
    """`dashboard.env` of the chart for a cluster whose Service names only the proxy knows."""
    env = {
        "HTTP_PROXY": proxy_url,
        "NO_PROXY": ",".join(no_proxy),
        "BUTLERS_DASHBOARD_DISCOVERY_INTERVAL": DISCOVERY_INTERVAL,
    }
    if kube_api:
        env["BUTLERS_KUBE_API"] = kube_api
    return [{"name": name, "value": value} for name, value in env.items()]


def render_chart(namespace: str, values: Mapping[str, Any]) -> list[dict[str, Any]]:
    rendered = helm.Chart.load(CHART).render(
        dict(values), name=RELEASE, namespace=namespace, is_install=True
    )
    documents: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if not path.endswith(".txt"):
            documents.extend(d for d in yaml.safe_load_all(text) if d)
    return documents


@dataclass(frozen=True)
class ChartDashboard:
    """What the chart renders for the dashboard, and what it tells the operator."""

    deployment: dict[str, Any]
    token_secret: dict[str, Any]
    database_secret: str  # where the operator writes the dashboard role's credentials

    @property
    def token(self) -> str:
        return base64.b64decode(self.token_secret["data"]["token"]).decode()


def find_dashboard(documents: list[dict[str, Any]]) -> ChartDashboard:
    def labelled(kind: str) -> dict[str, Any]:
        return next(
            d
            for d in documents
            if d["kind"] == kind
            and d["metadata"].get("labels", {}).get("app.kubernetes.io/name") == DASHBOARD_LABEL
        )

    operator = next(
        d
        for d in documents
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")
    )
    env = {
        e["name"]: e.get("value")
        for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    return ChartDashboard(
        deployment=labelled("Deployment"),
        token_secret=labelled("Secret"),
        database_secret=str(env["BUTLERS_OPERATOR_DASHBOARD_SECRET"]),
    )
