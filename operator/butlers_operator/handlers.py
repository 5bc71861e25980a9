"""kopf handlers: thin wrappers that call the reconciler and report what it did.

Handlers are registered into a registry built for one settings object
(`build_registry`), so nothing is configured at import time.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import kopf

from butlers.errors import DatabaseError
from butlers.spec import API_GROUP, API_VERSION
from butlers_operator.crd import PLURAL
from butlers_operator.kube import KubeClient, KubeError
from butlers_operator.reconcile import ReconcileFailure, reclaim_butler, reconcile_butler
from butlers_operator.settings import OperatorSettings

RESOURCE = (API_GROUP, API_VERSION, PLURAL)
FINALIZER = f"{API_GROUP}/reclaim"


def resolve_connection(
    settings: OperatorSettings, kopf_settings: kopf.OperatorSettings, logger: Any
) -> kopf.ConnectionInfo:
    """The API server: the configured URL, else in-cluster credentials, else kubeconfig."""
    if settings.kube_server:
        return kopf.ConnectionInfo(server=settings.kube_server, insecure=True)
    info = kopf.login_with_service_account(
        settings=kopf_settings, logger=logger
    ) or kopf.login_with_kubeconfig(settings=kopf_settings, logger=logger)
    if info is None:
        raise kopf.LoginError("no in-cluster service account and no kubeconfig")
    return info


def build_kopf_settings(settings: OperatorSettings) -> kopf.OperatorSettings:
    """kopf's own settings: progress kept in annotations, so `status` stays ours."""
    kopf_settings = kopf.OperatorSettings()
    kopf_settings.persistence.finalizer = FINALIZER
    kopf_settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    kopf_settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=API_GROUP, key="last-handled-configuration"
    )
    kopf_settings.posting.level = logging.INFO
    kopf_settings.networking.request_timeout = 60
    kopf_settings.watching.server_timeout = 300
    # The namespaces to serve are given explicitly; no need to scan the cluster for them.
    kopf_settings.scanning.disabled = not settings.cluster_wide
    return kopf_settings


def _report(body: Any, actions: list[tuple[str, str]]) -> None:
    for verb, what in actions:
        kopf.info(body, reason=verb.capitalize(), message=f"{verb} {what}")


def build_registry(settings: OperatorSettings) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry, id="login")
    def login(logger: Any, **kwargs: Any) -> kopf.ConnectionInfo:
        return resolve_connection(settings, kwargs["settings"], logger)

    @kopf.on.startup(registry=registry, id="open-client")
    async def open_client(memo: kopf.Memo, logger: Any, **kwargs: Any) -> None:
        memo["kube"] = KubeClient(resolve_connection(settings, kwargs["settings"], logger))

    @kopf.on.cleanup(registry=registry, id="close-client")
    async def close_client(memo: kopf.Memo, **_: Any) -> None:
        if "kube" in memo:
            await memo["kube"].close()

    async def reconcile(
        body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, retry: int, logger: Any
    ) -> None:
        try:
            outcome = await reconcile_butler(memo["kube"], settings, body, retry)
        except ReconcileFailure as failure:
            patch.status.update(failure.status)
            if not failure.retry:
                kopf.warn(body, reason="InvalidSpec", message=str(failure))
                raise kopf.PermanentError(str(failure)) from None
            kopf.warn(body, reason="DatabaseUnreachable", message=str(failure))
            raise kopf.TemporaryError(str(failure), delay=settings.retry_delay(retry)) from None
        except (KubeError, aiohttp.ClientError, TimeoutError) as exc:
            delay = settings.retry_delay(retry)
            raise kopf.TemporaryError(f"Kubernetes API: {exc}", delay=delay) from exc
        patch.status.update(outcome.status)
        _report(body, outcome.actions)
        logger.info("reconciled: %s", outcome.status["phase"])

    @kopf.on.resume(*RESOURCE, registry=registry, id="resume-butler")
    async def resume_butler(**kwargs: Any) -> None:
        await _call(reconcile, kwargs)

    @kopf.on.create(*RESOURCE, registry=registry, id="create-butler")
    async def create_butler(**kwargs: Any) -> None:
        await _call(reconcile, kwargs)

    @kopf.on.update(*RESOURCE, registry=registry, id="update-butler", field="spec")
    async def update_butler(**kwargs: Any) -> None:
        await _call(reconcile, kwargs)

    @kopf.timer(
        *RESOURCE,
        registry=registry,
        id="correct-drift",
        interval=settings.resync_seconds,
        initial_delay=settings.resync_seconds,
    )
    async def correct_drift(**kwargs: Any) -> None:
        # Brings back deleted or edited owned objects and refreshes `Available`.
        await _call(reconcile, {**kwargs, "retry": 0})

    @kopf.on.delete(*RESOURCE, registry=registry, id="reclaim-database")
    async def reclaim_database(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
        try:
            message = await reclaim_butler(memo["kube"], settings, body)
        except (DatabaseError, KubeError, aiohttp.ClientError) as exc:
            delay = settings.retry_delay(retry)
            kopf.warn(body, reason="ReclaimFailed", message=f"{exc}; retrying in {delay:g} s")
            raise kopf.TemporaryError(str(exc), delay=delay) from None
        kopf.info(body, reason="Reclaimed", message=message)

    return registry


async def _call(handler: Any, kwargs: dict[str, Any]) -> None:
    await handler(
        body=kwargs["body"],
        patch=kwargs["patch"],
        memo=kwargs["memo"],
        retry=kwargs.get("retry", 0),
        logger=kwargs["logger"],
    )
