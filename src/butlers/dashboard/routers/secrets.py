"""Secrets: each butler's store (written through its `secret_*` tools), the shared
store (the dashboard's own schema), and the credentials a spec names that live only in
the environment. Values are write-only: no route returns one.

`{name}` = `shared` (any case, unless a butler is so named) is the shared store.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from butlers.dashboard.context import Ctx, Dashboard, actor
from butlers.dashboard.directory import ButlerInfo
from butlers.dashboard.envelopes import ApiResponse, ok
from butlers.dashboard.errors import DashboardError, NotFound, ToolFailed, ValidationFailed
from butlers.redaction import SENSITIVE_KEY
from butlers.secretbox import KeyringError
from butlers.secrets import ENV_SETTING
from butlers.stores.secrets import (
    MAX_CATEGORY_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_VALUE_CHARS,
    SecretInputError,
    SecretMeta,
    SecretStore,
    check_key,
)

router = APIRouter(tags=["secrets"])
SHARED = "shared"


class SecretEntry(BaseModel):
    key: str
    category: str  # general | module:<name> | runtime | env | kubernetes-secret | ...
    description: str
    is_sensitive: bool
    is_set: bool | None  # None: the dashboard cannot tell (a variable of the pod)
    source: str  # store | shared | environment variable | Kubernetes Secret ...
    created_at: datetime | None = None
    updated_at: datetime | None = None
    updated_by: str | None = None


class SecretWrite(BaseModel):
    value: str | None = Field(
        default=None, max_length=MAX_VALUE_CHARS, description="Write-only; omit to keep it."
    )
    category: str | None = Field(default=None, max_length=MAX_CATEGORY_CHARS)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    is_sensitive: bool | None = None


class RotationResult(BaseModel):
    key_id: str
    reencrypted: dict[str, int]  # store (a butler's name, or shared) -> values re-sealed
    failed: dict[str, str]  # store -> why


def _from_meta(meta: SecretMeta, source: str) -> SecretEntry:
    return SecretEntry(
        key=meta.key,
        category=meta.category,
        description=meta.description,
        is_sensitive=meta.is_sensitive,
        is_set=meta.is_set,
        source=source,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        updated_by=meta.updated_by,
    )


def _is_set(dashboard: Dashboard, info: ButlerInfo, module: str, env: str) -> bool | None:
    for state in dashboard.monitor.get(info.name).modules:
        if state.get("name") != module:
            continue
        if state.get("status") == "active":
            return True
        if state.get("phase") == "credentials" and env in str(state.get("error")):
            return False
    return None


def spec_entries(dashboard: Dashboard, info: ButlerInfo) -> list[SecretEntry]:
    """The credentials the butler's spec names, as the environment provides them."""
    if info.resource is None:
        return []
    spec = info.resource.spec
    result: list[SecretEntry] = []

    def add(key: str, category: str, description: str, is_set: bool | None, source: str) -> None:
        result.append(
            SecretEntry(
                key=key,
                category=category,
                description=description,
                is_sensitive=True,
                is_set=is_set,
                source=source,
            )
        )

    for module, config in spec.modules.items():
        for field, value in (config or {}).items():
            if ENV_SETTING.search(field) and isinstance(value, str):
                is_set = _is_set(dashboard, info, module, value)
                add(
                    value,
                    f"module:{module}",
                    f"spec.modules.{module}.{field}",
                    is_set,
                    "environment variable",
                )
    if spec.runtime.api_key_env:
        add(
            spec.runtime.api_key_env,
            "runtime",
            "spec.runtime.apiKeyEnv (the model's API key)",
            None,
            "environment variable",
        )
    if spec.runtime.credentials_secret:
        add(
            spec.runtime.credentials_secret,
            "kubernetes-secret",
            "spec.runtime.credentialsSecret",
            None,
            "Kubernetes Secret",
        )
    for env in spec.env:
        if env.secret_key_ref is not None:
            ref = env.secret_key_ref
            add(
                env.name,
                "env",
                f"spec.env {env.name}",
                None,
                f"Kubernetes Secret {ref.name}/{ref.key}",
            )
        elif env.value is not None and SENSITIVE_KEY.search(env.name):
            add(
                env.name,
                "env",
                f"spec.env {env.name}",
                bool(env.value),
                "literal value in the spec",
            )
    return result


def _is_shared(dashboard: Dashboard, name: str) -> bool:
    return name.lower() == SHARED and name not in dashboard.butlers()


async def entries(dashboard: Dashboard, name: str) -> list[SecretEntry]:
    if _is_shared(dashboard, name):
        store = await dashboard.shared.store()
        return [_from_meta(m, SHARED) for m in await store.list()]
    info = dashboard.butler(name)
    stored = await dashboard.db.read(name, lambda pool: SecretStore(pool).list())
    result = {m.key: _from_meta(m, "store") for m in stored}
    for entry in spec_entries(dashboard, info):
        if entry.key in result:
            # The store wins; the spec still says what it is for.
            if not result[entry.key].description:
                result[entry.key].description = entry.description
        else:
            result[entry.key] = entry
    return sorted(result.values(), key=lambda e: (e.category, e.key))


def _key(key: str) -> None:
    try:
        check_key(key)
    except SecretInputError as exc:
        raise ValidationFailed(str(exc)) from None


@router.get("/api/butlers/{name}/secrets", response_model=ApiResponse[list[SecretEntry]])
async def list_secrets(name: str, dashboard: Ctx) -> dict[str, Any]:
    """Stored secrets (metadata only) and the credentials the spec names; `shared`: the
    shared store."""
    return ok(await entries(dashboard, name))


@router.get("/api/butlers/{name}/secrets/{key}", response_model=ApiResponse[SecretEntry])
async def get_secret(name: str, key: str, dashboard: Ctx) -> dict[str, Any]:
    for entry in await entries(dashboard, name):
        if entry.key == key:
            return ok(entry)
    raise NotFound(f"{name!r} has no secret {key!r}", butler=name)


async def _audit_shared(
    dashboard: Dashboard,
    request: Request,
    operation: str,
    key: str,
    body: dict[str, Any],
    started: float,
    error: str | None,
) -> None:
    await dashboard.audit.record(
        actor=actor(request),
        butler=None,
        operation=operation,
        target=f"{SHARED}:{key}",
        request=body,
        ok=error is None,
        error=error,
        duration_ms=round((time.monotonic() - started) * 1000),
        client=request.client.host if request.client else None,
    )


def _audited(key: str, body: SecretWrite) -> dict[str, Any]:
    fields = body.model_dump(exclude_none=True, exclude={"value"})
    return {"key": key, **fields, "value": "[written]" if body.value is not None else "[kept]"}


@router.put("/api/butlers/{name}/secrets/{key}", response_model=ApiResponse[SecretEntry])
async def put_secret(
    name: str, key: str, body: SecretWrite, request: Request, dashboard: Ctx
) -> dict[str, Any]:
    """Create or update a secret (the value is write-only; omitted fields are kept).
    Audited with who wrote it, never with the value."""
    _key(key)
    if _is_shared(dashboard, name):
        started, error = time.monotonic(), None
        try:
            keyring = dashboard.shared.keys.require(reload=True) if body.value else None
            store = await dashboard.shared.store()
            meta = await store.put(key, keyring=keyring, actor=actor(request), **body.model_dump())
        except (SecretInputError, KeyringError) as exc:
            error = str(exc)
            raise ValidationFailed(error) from None
        finally:
            await _audit_shared(
                dashboard,
                request,
                "secret.put",
                key,
                {"tool": None, "arguments": _audited(key, body)},
                started,
                error,
            )
        return ok(_from_meta(meta, SHARED))
    info = dashboard.butler(name)
    arguments = {**body.model_dump(exclude_none=True), "key": key, "actor": actor(request)}
    audited = {**_audited(key, body), "actor": actor(request)}
    outcome = await dashboard.write(
        request, info, "secret.put", "secret_put", arguments, target=key, audited=audited
    )
    data = outcome.data if isinstance(outcome.data, dict) else {}
    return ok(SecretEntry(**{**data, "source": "store"}))


@router.delete("/api/butlers/{name}/secrets/{key}", response_model=ApiResponse[SecretEntry])
async def delete_secret(name: str, key: str, request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Delete a stored secret (audited); 404 when the store has none of that name."""
    _key(key)
    if _is_shared(dashboard, name):
        started = time.monotonic()
        store = await dashboard.shared.store()
        before = await store.get(key)
        deleted = await store.delete(key)
        await _audit_shared(
            dashboard,
            request,
            "secret.delete",
            key,
            {"tool": None, "arguments": {"key": key}},
            started,
            None if deleted else "no such secret",
        )
        if before is None or not deleted:
            raise NotFound(f"the shared store has no secret {key!r}")
        return ok(_from_meta(before, SHARED))
    info = dashboard.butler(name)
    before_rows = await dashboard.db.read(name, lambda pool: SecretStore(pool).get(key))
    try:
        await dashboard.write(
            request, info, "secret.delete", "secret_delete", {"key": key}, target=key
        )
    except ToolFailed as exc:
        if "no secret" in exc.message:
            raise NotFound(f"butler {name!r} stores no secret {key!r}", butler=name) from None
        raise
    if before_rows is None:  # written and deleted again meanwhile: it is gone all the same
        raise NotFound(f"butler {name!r} stores no secret {key!r}", butler=name)
    return ok(_from_meta(before_rows, "store"))


@router.post("/api/secrets/rotate", response_model=ApiResponse[RotationResult])
async def rotate(request: Request, dashboard: Ctx) -> dict[str, Any]:
    """Re-seal every stored value with the first key of the current keyring: the shared
    store here, each butler's through its `secrets_reencrypt` tool. Run it after putting
    a new key first in the keyring; drop the old key once nothing failed."""
    started, failed, done = time.monotonic(), {}, {}
    try:
        keyring = dashboard.shared.keys.require(reload=True)
        done[SHARED] = await (await dashboard.shared.store()).reencrypt(keyring)
    except KeyringError as exc:
        raise ValidationFailed(str(exc)) from None
    finally:
        await _audit_shared(dashboard, request, "secrets.rotate", "*", {}, started, None)
    for name, info in sorted(dashboard.butlers().items()):
        try:
            outcome = await dashboard.write(
                request, info, "secrets.rotate", "secrets_reencrypt", {}, target="*"
            )
        except DashboardError as exc:
            failed[name] = f"{exc.code}: {exc.message}"
            continue
        data = outcome.data if isinstance(outcome.data, dict) else {}
        if data.get("key_id") != keyring.primary_id:
            failed[name] = (
                f"the butler seals with key {data.get('key_id')}, the dashboard with "
                f"{keyring.primary_id}: give both the same keyring"
            )
        else:
            done[name] = int(data.get("reencrypted", 0))
    return ok(RotationResult(key_id=keyring.primary_id, reencrypted=done, failed=failed))
