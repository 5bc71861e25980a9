"""Butlers of a Kubernetes namespace, listed from the API server (`--kube NAMESPACE`).

Credentials: `BUTLERS_KUBE_API` (a server URL, no authentication: test API servers),
else the pod's ServiceAccount (in a cluster), else the current context of
`KUBECONFIG` / `~/.kube/config` (bearer token or client certificate). The
ServiceAccount token is re-read on every refresh, so a rotated token is picked up.
Each Butler gives its MCP URL (`status.endpoint`), its schema (`status.schema`),
its spec, and its phase and conditions for the overview. A butler's log is read from
its pod (`pod_logs.PodLogs`, over the same credentials).
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import yaml
from pydantic import ValidationError

from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.pod_logs import PodLogs
from butlers.errors import ButlersError
from butlers.settings import DashboardSettings
from butlers.spec import API_GROUP, API_VERSION, ButlerResource, schema_name

log = logging.getLogger(__name__)
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
REQUEST_TIMEOUT = 10.0


@dataclass
class KubeAccess:
    server: str
    verify: ssl.SSLContext | bool = True
    token_file: Path | None = None
    token: str | None = field(default=None, repr=False)
    cert: tuple[str, str] | None = None

    def headers(self) -> dict[str, str]:
        token = self.token_file.read_text().strip() if self.token_file else self.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def client(self) -> httpx.AsyncClient:
        verify: Any = self.verify
        if self.cert and isinstance(verify, ssl.SSLContext):
            verify.load_cert_chain(*self.cert)
        return httpx.AsyncClient(base_url=self.server, verify=verify, timeout=REQUEST_TIMEOUT)


def _materialize(data: str | None, path: str | None, suffix: str) -> str | None:
    """A kubeconfig `*-data` value as a file (ssl wants paths)."""
    if path:
        return path
    if not data:
        return None
    handle = tempfile.NamedTemporaryFile("wb", suffix=suffix, delete=False)  # noqa: SIM115
    handle.write(base64.b64decode(data))
    handle.close()
    os.chmod(handle.name, 0o600)
    return handle.name


def access_from(
    environ: Mapping[str, str], api: str | None = None, token: str | None = None
) -> KubeAccess:
    """`api` (no TLS, `token` as bearer), else in-cluster, else the kubeconfig."""
    if api:
        return KubeAccess(server=api.rstrip("/"), token=token)
    host = environ.get("KUBERNETES_SERVICE_HOST")
    if host and (SERVICE_ACCOUNT / "token").exists():
        port = environ.get("KUBERNETES_SERVICE_PORT", "443")
        context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
        host = f"[{host}]" if ":" in host else host
        return KubeAccess(f"https://{host}:{port}", context, SERVICE_ACCOUNT / "token")
    config_path = Path(environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config")
    return _from_kubeconfig(config_path.expanduser())


def _from_kubeconfig(path: Path) -> KubeAccess:
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ButlersError(
            f"--kube needs access to the API server: no ServiceAccount here and "
            f"{path} cannot be read ({exc})"
        ) from None

    def named(kind: str, name: str) -> dict[str, Any]:
        for entry in config.get(kind) or []:
            if entry.get("name") == name:
                return dict(entry.get(kind[:-1]) or {})
        raise ButlersError(f"{path}: no {kind[:-1]} named {name!r}")

    context = named("contexts", config.get("current-context", ""))
    cluster, user = named("clusters", context["cluster"]), named("users", context["user"])
    verify: ssl.SSLContext | bool = not cluster.get("insecure-skip-tls-verify", False)
    ca = _materialize(
        cluster.get("certificate-authority-data"), cluster.get("certificate-authority"), ".crt"
    )
    if verify and ca:
        verify = ssl.create_default_context(cafile=ca)
    cert = _materialize(user.get("client-certificate-data"), user.get("client-certificate"), ".crt")
    key = _materialize(user.get("client-key-data"), user.get("client-key"), ".key")
    if cert and key and verify is True:
        verify = ssl.create_default_context()
    return KubeAccess(
        server=str(cluster["server"]).rstrip("/"),
        verify=verify,
        token=user.get("token"),
        cert=(cert, key) if cert and key else None,
    )


def butler_info(item: dict[str, Any], namespace: str, schema_prefix: str) -> ButlerInfo | None:
    metadata, status = item.get("metadata") or {}, item.get("status") or {}
    name = metadata.get("name", "")
    try:
        resource = ButlerResource.model_validate(
            {
                "apiVersion": item.get("apiVersion"),
                "kind": item.get("kind"),
                "metadata": {
                    k: metadata[k]
                    for k in ("name", "namespace", "labels", "annotations")
                    if k in metadata
                },
                "spec": item.get("spec"),
            }
        )
    except ValidationError as exc:
        log.warning("Butler %s/%s is invalid, skipped: %s", namespace, name, exc)
        return None
    url = status.get("endpoint") or f"http://{name}.{namespace}.svc:{resource.spec.port}/mcp"
    return ButlerInfo(
        name=name,
        url=url,
        schema=status.get("schema") or schema_name(name, schema_prefix),
        modules=tuple(resource.spec.modules),
        resource=resource,
        source=f"Butler {namespace}/{name}",
        kube={
            "namespace": namespace,
            "phase": status.get("phase"),
            "endpoint": status.get("endpoint"),
            "observed_generation": status.get("observedGeneration"),
            "conditions": [
                {
                    "type": c.get("type"),
                    "status": c.get("status"),
                    "reason": c.get("reason"),
                    "message": c.get("message"),
                    "last_transition_time": c.get("lastTransitionTime"),
                }
                for c in status.get("conditions") or []
            ],
        },
    )


class KubeDirectory:
    def __init__(
        self,
        namespace: str,
        access: KubeAccess,
        *,
        schema_prefix: str = "",
        mcp_token: str | None = None,
    ) -> None:
        self.namespace = namespace
        self._access = access
        self._prefix = schema_prefix
        self._token = mcp_token
        self._client: httpx.AsyncClient | None = None
        self._butlers: dict[str, ButlerInfo] = {}
        self.pod_logs = PodLogs(namespace, access.client(), access.headers)

    @classmethod
    def from_settings(cls, settings: DashboardSettings) -> KubeDirectory:
        assert settings.kube_namespace is not None
        return cls(
            settings.kube_namespace,
            access_from(settings.environ, settings.kube_api, settings.kube_token),
            schema_prefix=settings.schema_prefix,
            mcp_token=settings.mcp_token,
        )

    def butlers(self) -> dict[str, ButlerInfo]:
        return dict(self._butlers)

    @property
    def mcp_token(self) -> str | None:
        return self._token

    def describe(self) -> str:
        return f"Butler resources in namespace {self.namespace} ({self._access.server})"

    async def refresh(self) -> bool:
        if self._client is None:
            self._client = self._access.client()
        path = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{self.namespace}/butlers"
        try:
            response = await self._client.get(path, headers=self._access.headers())
            response.raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("listing Butlers in %s failed: %s", self.namespace, exc)
            return False
        infos = [
            butler_info(i, self.namespace, self._prefix) for i in response.json().get("items") or []
        ]
        butlers = {info.name: info for info in infos if info is not None}
        changed = butlers != self._butlers or any(
            butlers[n].kube != self._butlers[n].kube for n in butlers
        )
        self._butlers = butlers
        return changed

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        await self.pod_logs.aclose()
