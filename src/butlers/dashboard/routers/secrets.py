"""Secrets metadata: which credentials each butler's spec names, never a value.

There is no secrets store here: credentials are environment variables (on a
laptop) or Kubernetes Secrets (in a cluster) that the Butler spec names — module
`*Env` settings, `runtime.apiKeyEnv`/`credentialsSecret`, env entries from
`secretKeyRef`. Writing them through the dashboard is `NOT_SUPPORTED`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import NotFound, NotSupported
from butlers.dashboard.support import not_supported
from butlers.redaction import SENSITIVE_KEY
from butlers.secrets import ENV_SETTING

router = APIRouter(tags=["secrets"])
NO_STORE_SHORT = "there is no secrets store (credentials are env vars or Kubernetes Secrets)"
NO_STORE = (
    "there is no secrets store: set the variable in the butler's environment (butlers up) "
    "or in the Kubernetes Secret its Butler spec names, then restart the butler"
)


class SecretEntry(BaseModel):
    key: str
    category: str  # module:<name> | runtime | env | kubernetes-secret
    description: str
    is_sensitive: bool
    is_set: bool | None  # None: the dashboard cannot tell
    source: str


def _is_set(dashboard: Dashboard, info: ButlerInfo, module: str, env: str) -> bool | None:
    for state in dashboard.monitor.get(info.name).modules:
        if state.get("name") != module:
            continue
        if state.get("status") == "active":
            return True
        if state.get("phase") == "credentials" and env in str(state.get("error")):
            return False
    return None


def entries(dashboard: Dashboard, info: ButlerInfo) -> list[SecretEntry]:
    if info.resource is None:
        return []
    spec = info.resource.spec
    result: list[SecretEntry] = []
    for module, config in spec.modules.items():
        for field, value in (config or {}).items():
            if ENV_SETTING.search(field) and isinstance(value, str):
                result.append(
                    SecretEntry(
                        key=value,
                        category=f"module:{module}",
                        description=f"spec.modules.{module}.{field}",
                        is_sensitive=True,
                        is_set=_is_set(dashboard, info, module, value),
                        source="environment variable",
                    )
                )
    if spec.runtime.api_key_env:
        result.append(
            SecretEntry(
                key=spec.runtime.api_key_env,
                category="runtime",
                description="spec.runtime.apiKeyEnv (the model's API key)",
                is_sensitive=True,
                is_set=None,
                source="environment variable",
            )
        )
    if spec.runtime.credentials_secret:
        result.append(
            SecretEntry(
                key=spec.runtime.credentials_secret,
                category="kubernetes-secret",
                description="spec.runtime.credentialsSecret",
                is_sensitive=True,
                is_set=None,
                source="Kubernetes Secret",
            )
        )
    for env in spec.env:
        if env.secret_key_ref is not None:
            ref = env.secret_key_ref
            result.append(
                SecretEntry(
                    key=env.name,
                    category="env",
                    description=f"spec.env {env.name}",
                    is_sensitive=True,
                    is_set=None,
                    source=f"Kubernetes Secret {ref.name}/{ref.key}",
                )
            )
        elif env.value is not None and SENSITIVE_KEY.search(env.name):
            result.append(
                SecretEntry(
                    key=env.name,
                    category="env",
                    description=f"spec.env {env.name}",
                    is_sensitive=True,
                    is_set=bool(env.value),
                    source="literal value in the spec",
                )
            )
    return sorted(result, key=lambda e: (e.category, e.key))


def _target(dashboard: Dashboard, name: str) -> ButlerInfo | None:
    if name.lower() == "shared" and name not in dashboard.butlers():
        return None
    return dashboard.butler(name)


@router.get("/api/butlers/{name}/secrets", response_model=ApiResponse[list[SecretEntry]])
async def list_secrets(name: str, dashboard: Ctx) -> dict[str, Any]:
    """The credentials the butler's spec names, with whether each is set (when known)."""
    info = _target(dashboard, name)
    if info is None:
        return ok([], supported=False, reason="credentials are per butler; none are shared")
    return ok(entries(dashboard, info))


@router.get("/api/butlers/{name}/secrets/{key}", response_model=ApiResponse[SecretEntry])
async def get_secret(name: str, key: str, dashboard: Ctx) -> dict[str, Any]:
    info = _target(dashboard, name)
    for entry in entries(dashboard, info) if info else []:
        if entry.key == key:
            return ok(entry)
    raise NotFound(f"butler {name!r} names no credential {key!r}", butler=name)


@router.put(
    "/api/butlers/{name}/secrets/{key}",
    response_model=ApiResponse[SecretEntry],
    openapi_extra=not_supported(NO_STORE_SHORT),
)
async def put_secret(name: str, key: str, dashboard: Ctx) -> dict[str, Any]:
    """501: there is no secrets store to write to."""
    _target(dashboard, name)
    raise NotSupported(NO_STORE, butler=name)


@router.delete(
    "/api/butlers/{name}/secrets/{key}",
    response_model=ApiResponse[SecretEntry],
    openapi_extra=not_supported(NO_STORE_SHORT),
)
async def delete_secret(name: str, key: str, dashboard: Ctx) -> dict[str, Any]:
    """501: there is no secrets store to delete from."""
    _target(dashboard, name)
    raise NotSupported(NO_STORE, butler=name)
