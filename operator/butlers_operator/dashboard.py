"""The dashboard's database role in a cluster: provisioned by the operator, kept in a Secret.

With `BUTLERS_OPERATOR_DASHBOARD_SECRET` (the chart sets it when the dashboard is
enabled) the operator makes sure the dashboard's login role and its own schema (both named
after the release by the chart: roles are server-wide, so two releases on one server never
share one) exist, with the same `butlers.db.provision.ensure`
as `butlers up`, and writes their credentials to that Secret in the dashboard's namespace
(`BUTLERS_OPERATOR_DASHBOARD_NAMESPACE`, default its own), where the dashboard's
Deployment reads them. It does so at start-up (so the dashboard can start
before any Butler exists) and before reconciling a Butler (so the butler's migration,
which grants the role read access to its schema, finds the role). A role that logs in
with the stored password is left alone; the admin is contacted only to repair.

Without a token in the chart's values, the operator also creates the dashboard's token
Secret (`BUTLERS_OPERATOR_DASHBOARD_TOKEN_SECRET`) with a generated token, once: the chart
then renders without cluster access (`helm template`, Argo CD) and the token never changes
at a sync.

Each butler's migrate container gets the role's name (`BUTLERS_DASHBOARD_ROLE`), so
enabling the dashboard rolls every butler once and their migrations grant the reads.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import time
from typing import Any

from butlers.db.provision import Credentials, ensure
from butlers.errors import DatabaseError
from butlers_operator.kube import KubeClient, KubeError, build_object_path
from butlers_operator.reconcile import ensure_namespace_auth, read_admin_dsn
from butlers_operator.render import build_butler_dsn
from butlers_operator.settings import OperatorSettings

log = logging.getLogger(__name__)
MANAGED_BY = {"app.kubernetes.io/managed-by": "butlers-operator"}
# The dashboard refuses shorter tokens (as the chart's values schema does).
MIN_TOKEN_LENGTH = 16


def build_dashboard_names(settings: OperatorSettings) -> tuple[str, str]:
    """(role, schema) of the dashboard: the release's own (`BUTLERS_OPERATOR_DASHBOARD_ROLE`),
    else the schema prefix's."""
    return settings.dashboard_role, settings.dashboard_schema


def dashboard_namespace(settings: OperatorSettings) -> str:
    """Where the dashboard runs (and reads its Secret): the chart says, else the operator's."""
    return settings.dashboard_namespace or settings.operator_namespace


def render_dashboard_secret(
    settings: OperatorSettings, credentials: Credentials, dsn: str
) -> dict[str, Any]:
    assert settings.dashboard_secret is not None
    values = {
        "dsn": dsn,
        "schema": credentials.schema,
        "role": credentials.role,
        "password": credentials.password,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": settings.dashboard_secret,
            "namespace": dashboard_namespace(settings),
            "labels": dict(MANAGED_BY),
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


def _decode(secret: dict[str, Any] | None, key: str) -> str | None:
    value = ((secret or {}).get("data") or {}).get(key)
    return base64.b64decode(value).decode() if value else None


async def ensure_dashboard_database(
    kube: KubeClient, settings: OperatorSettings, admin_dsn: str
) -> Credentials:
    """The dashboard's role and schema verified (or provisioned), its Secret up to date."""
    assert settings.dashboard_secret is not None
    role, schema = build_dashboard_names(settings)
    path = build_object_path(
        "v1", "Secret", dashboard_namespace(settings), settings.dashboard_secret
    )
    stored = await kube.get(path)
    credentials = await ensure(admin_dsn, schema, role=role, password=_decode(stored, "password"))
    dsn = build_butler_dsn(credentials, admin_dsn, settings.butler_database_host)
    manifest = render_dashboard_secret(settings, credentials, dsn)
    if stored is None:
        try:
            await kube.create(manifest)
        except KubeError as exc:
            if exc.status != 409:
                raise
            await kube.patch(path, {"data": manifest["data"]})
    elif any(_decode(stored, key) != _decode(manifest, key) for key in manifest["data"]):
        await kube.patch(path, {"data": manifest["data"]})
    return credentials


def render_dashboard_token_secret(settings: OperatorSettings, token: str) -> dict[str, Any]:
    assert settings.dashboard_token_secret is not None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": settings.dashboard_token_secret,
            "namespace": dashboard_namespace(settings),
            "labels": dict(MANAGED_BY) | {"app.kubernetes.io/name": "butlers-dashboard"},
        },
        "type": "Opaque",
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


async def ensure_dashboard_token(kube: KubeClient, settings: OperatorSettings) -> bool:
    """The dashboard's token Secret, created with a generated token when it is missing.

    An existing token is never replaced (that would log everyone out); one without a
    usable `token` key gets one. Returns whether it wrote anything.
    """
    if settings.dashboard_token_secret is None:
        return False
    path = build_object_path(
        "v1", "Secret", dashboard_namespace(settings), settings.dashboard_token_secret
    )
    stored = await kube.get(path)
    if len(_decode(stored, "token") or "") >= MIN_TOKEN_LENGTH:
        return False
    manifest = render_dashboard_token_secret(settings, secrets.token_urlsafe(36))
    if stored is None:
        try:
            await kube.create(manifest)
            return True
        except KubeError as exc:
            if exc.status != 409:
                raise
            return False
    await kube.patch(path, {"data": manifest["data"]})
    return True


class DashboardDatabase:
    """`ensure_dashboard_database` (and the namespace's auth Secret) at most once per
    `resync_seconds`, one pass at a time."""

    def __init__(self, kube: KubeClient, settings: OperatorSettings) -> None:
        self.kube = kube
        self.settings = settings
        self._lock = asyncio.Lock()
        self._checked_at: float | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.dashboard_secret is not None

    async def ensure(self) -> None:
        if not self.enabled:
            return
        async with self._lock:
            fresh = self._checked_at is not None and (
                time.monotonic() - self._checked_at < self.settings.resync_seconds
            )
            if fresh:
                return
            # The token first: the dashboard's pod needs it whatever the database's state.
            await ensure_dashboard_token(self.kube, self.settings)
            admin_dsn = await read_admin_dsn(self.kube, self.settings)
            await ensure_dashboard_database(self.kube, self.settings, admin_dsn)
            # The namespace's user token, which the dashboard's pod reads: there before the
            # first Butler, so the dashboard starts in an empty namespace too.
            await ensure_namespace_auth(self.kube, dashboard_namespace(self.settings), None)
            self._checked_at = time.monotonic()

    async def ensure_until_done(self) -> None:
        """At start-up: until the role and its Secret are there (backing off between tries)."""
        retry = 0
        while self.enabled:
            try:
                await self.ensure()
                log.info("the dashboard's database role is ready")
                return
            except (DatabaseError, KubeError, OSError) as exc:
                delay = self.settings.retry_delay(retry)
                log.warning("the dashboard's database role: %s; trying again in %g s", exc, delay)
                retry += 1
                await asyncio.sleep(delay)
                continue
            except Exception:
                delay = self.settings.retry_delay(retry)
                log.exception("the dashboard's database role; trying again in %g s", delay)
                retry += 1
                await asyncio.sleep(delay)
