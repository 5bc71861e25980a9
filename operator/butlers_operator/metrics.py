"""The operator's Prometheus metrics: `/metrics` behind a bearer token.

What is counted: reconcile passes by result, failed passes by reason (the condition's
reason, or the kind of error a pass raised), and Butlers by phase as the operator last
wrote them. The endpoint needs `Authorization: Bearer <token>`; the token lives in a
Secret in the operator's namespace (`BUTLERS_OPERATOR_METRICS_SECRET`, key `token`),
created with a generated token when missing, so the chart's ServiceMonitor names it
(`bearerTokenSecret`) without the chart ever holding it.
"""

from __future__ import annotations

import base64
import hmac
import logging
import secrets
from collections import Counter
from collections.abc import Mapping
from urllib.parse import urlsplit

from aiohttp import web

from butlers_operator.kube import KubeClient, KubeError, build_object_path
from butlers_operator.settings import OperatorSettings

log = logging.getLogger(__name__)
PREFIX = "butlers_operator"
PHASES = ("Pending", "Provisioning", "Ready", "Failed")
Key = tuple[str, str]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class OperatorMetrics:
    """Counters and the phase of each Butler; `render` is the text exposition format."""

    def __init__(self) -> None:
        self.reconciles: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.phases: dict[Key, str] = {}

    def passed(self, key: Key, phase: str | None, problem: str | None) -> None:
        """A pass ended with a status (`phase`) and maybe a problem (its reason)."""
        self.reconciles["error" if problem else "success"] += 1
        if problem:
            self.errors[problem] += 1
        if phase:
            self.phases[key] = phase

    def failed(self, reason: str) -> None:
        """A pass raised (it is retried): `reason` names what failed."""
        self.reconciles["error"] += 1
        self.errors[reason] += 1

    def phase(self, key: Key, phase: str | None) -> None:
        if phase:
            self.phases[key] = phase

    def forget(self, key: Key) -> None:
        self.phases.pop(key, None)

    def render(self) -> str:
        lines = [
            f"# HELP {PREFIX}_reconciles_total Reconcile passes of Butlers, by result.",
            f"# TYPE {PREFIX}_reconciles_total counter",
        ]
        for result in ("success", "error"):
            lines.append(
                f'{PREFIX}_reconciles_total{{result="{result}"}} {self.reconciles[result]}'
            )
        lines += [
            f"# HELP {PREFIX}_reconcile_errors_total Failed reconcile passes, by reason.",
            f"# TYPE {PREFIX}_reconcile_errors_total counter",
        ]
        for reason, count in sorted(self.errors.items()):
            lines.append(f'{PREFIX}_reconcile_errors_total{{reason="{_escape(reason)}"}} {count}')
        counts = Counter(self.phases.values())
        lines += [
            f"# HELP {PREFIX}_butlers Butlers the operator serves, by phase.",
            f"# TYPE {PREFIX}_butlers gauge",
        ]
        for phase in sorted(set(PHASES) | set(counts)):
            lines.append(f'{PREFIX}_butlers{{phase="{_escape(phase)}"}} {counts[phase]}')
        return "\n".join(lines) + "\n"


def _decode(secret: Mapping[str, object] | None) -> str:
    data = (secret or {}).get("data") or {}
    value = data.get("token") if isinstance(data, dict) else None
    return base64.b64decode(str(value)).decode() if value else ""


async def ensure_metrics_token(kube: KubeClient, settings: OperatorSettings) -> str:
    """The token `/metrics` requires: the Secret's, or a new one written there."""
    assert settings.metrics_secret is not None
    namespace = settings.operator_namespace
    path = build_object_path("v1", "Secret", namespace, settings.metrics_secret)
    token = _decode(await kube.get(path))
    if len(token) >= 16:
        return token
    token = secrets.token_urlsafe(32)
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": settings.metrics_secret,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "butlers-operator"},
        },
        "type": "Opaque",
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }
    try:
        await kube.create(manifest)
    except KubeError as exc:
        if exc.status != 409:
            raise
        return _decode(await kube.get(path))  # another replica wrote it first
    return token


def build_metrics_app(metrics: OperatorMetrics, token: str, path: str) -> web.Application:
    expected = f"Bearer {token}".encode()

    async def serve(request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return web.Response(
                status=401, text="a bearer token is required\n",
                headers={"WWW-Authenticate": 'Bearer realm="butlers-operator"'},
            )  # fmt: skip
        return web.Response(
            text=metrics.render(), content_type="text/plain", charset="utf-8",
            headers={"Cache-Control": "no-store"},
        )  # fmt: skip

    app = web.Application()
    app.router.add_get(path, serve)
    return app


async def serve_metrics(metrics: OperatorMetrics, token: str, endpoint: str) -> web.AppRunner:
    """Start serving; the caller cleans the returned runner up."""
    parts = urlsplit(endpoint)
    runner = web.AppRunner(build_metrics_app(metrics, token, parts.path or "/metrics"))
    await runner.setup()
    site = web.TCPSite(runner, parts.hostname or "0.0.0.0", parts.port or 8081)
    await site.start()
    log.info("metrics on %s", endpoint)
    return runner
