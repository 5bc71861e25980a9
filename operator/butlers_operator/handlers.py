"""kopf handlers: thin wrappers that hand each event to the controller.

Handlers are registered into a registry built for one settings object
(`build_registry`), so nothing is configured at import time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

import aiohttp
import kopf

from butlers.errors import DatabaseError
from butlers.spec import API_GROUP, API_VERSION
from butlers_operator.controller import Controller
from butlers_operator.crd import PLURAL
from butlers_operator.kube import KubeClient, KubeError
from butlers_operator.metrics import ensure_metrics_token, serve_metrics
from butlers_operator.reconcile import reclaim_butler
from butlers_operator.settings import OperatorSettings

RESOURCE = (API_GROUP, API_VERSION, PLURAL)
FINALIZER = f"{API_GROUP}/reclaim"
MANAGED = {"app.kubernetes.io/managed-by": "butlers-operator"}
TRANSIENT = (KubeError, aiohttp.ClientError, TimeoutError)


def resolve_connection(
    settings: OperatorSettings, kopf_settings: kopf.OperatorSettings, logger: Any
) -> kopf.ConnectionInfo:
    """The API server: the configured URL, else in-cluster credentials, else kubeconfig.

    Called again whenever a request is refused with 401, so a rotated ServiceAccount
    token is read anew (kopf does the same for its own watches).
    """
    if settings.kube_server:
        return kopf.ConnectionInfo(server=settings.kube_server, insecure=True)
    info = kopf.login_with_service_account(
        settings=kopf_settings, logger=logger
    ) or kopf.login_with_kubeconfig(settings=kopf_settings, logger=logger)
    if info is None:
        raise kopf.LoginError("no in-cluster service account and no kubeconfig")
    return info


def build_kopf_settings(settings: OperatorSettings) -> kopf.OperatorSettings:
    """kopf's own settings: progress in annotations, the diff base in `status.kopf`.

    The diff base is a copy of the spec: in an annotation it would halve the room a
    Butler has under the 256 KiB annotation limit (kubectl's client-side apply keeps
    another copy there).
    """
    kopf_settings = kopf.OperatorSettings()
    kopf_settings.persistence.finalizer = FINALIZER
    kopf_settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    kopf_settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage(
        field="status.kopf.lastHandledConfiguration"
    )
    kopf_settings.posting.level = logging.INFO
    kopf_settings.networking.request_timeout = 60
    kopf_settings.watching.server_timeout = 300
    # The namespaces to serve are given explicitly; `__main__` waits for the CRD itself.
    kopf_settings.scanning.disabled = not settings.cluster_wide
    return kopf_settings


def _post_event(body: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
    raw = cast(kopf.RawBody, dict(body))
    kopf.event(kopf.Body(raw), type=kind, reason=reason, message=message[:1024])


def _reclaims(spec: Mapping[str, Any], **_: Any) -> bool:
    """Only a Butler whose deletion drops data carries the finalizer."""
    return (spec.get("database") or {}).get("reclaimPolicy") == "Delete"


# API discovery, which every authenticated client may read (and kopf does not use once
# running): it answers whether the operator reaches the API server and is still
# authenticated. RBAC is left out on purpose: a restart would not fix it.
PROBE_PATH = "/apis/authentication.k8s.io/v1"


def build_registry(
    settings: OperatorSettings, events: Callable[..., None] = _post_event
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry, id="login")
    def login(logger: Any, **kwargs: Any) -> kopf.ConnectionInfo:
        return resolve_connection(settings, kwargs["settings"], logger)

    @kopf.on.startup(registry=registry, id="start-controller")
    async def start_controller(memo: kopf.Memo, logger: Any, **kwargs: Any) -> None:
        kopf_settings = kwargs["settings"]
        kube = KubeClient(lambda: resolve_connection(settings, kopf_settings, logger))
        controller = Controller(kube, settings, events)
        memo["kube"], memo["controller"] = kube, controller
        controller.start()
        if settings.metrics_endpoint:
            token = await ensure_metrics_token(kube, settings)
            memo["metrics"] = await serve_metrics(
                controller.metrics, token, settings.metrics_endpoint
            )

    @kopf.on.cleanup(registry=registry, id="stop-controller")
    async def stop_controller(memo: kopf.Memo, **_: Any) -> None:
        if "metrics" in memo:
            await memo["metrics"].cleanup()
        if "controller" in memo:
            await memo["controller"].close()
        if "kube" in memo:
            await memo["kube"].close()

    @kopf.on.probe(registry=registry, id="kubernetes-api")
    async def kubernetes_api(memo: kopf.Memo, **_: Any) -> str:
        # Liveness: an operator that cannot talk to the API server is restarted.
        try:
            await memo["kube"].get(PROBE_PATH)
        except (*TRANSIENT, OSError) as exc:
            raise kopf.PermanentError(f"cannot reach the Kubernetes API: {exc}") from exc
        return "reachable"

    async def reconcile(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
        memo["controller"].start_resync()
        try:
            outcome = await memo["controller"].reconcile(body)
        except TRANSIENT as exc:
            delay = settings.retry_delay(retry)
            raise kopf.TemporaryError(f"Kubernetes API: {exc}", delay=delay) from exc
        if outcome is not None and outcome.retry and outcome.problem is not None:
            raise kopf.TemporaryError(outcome.problem.message, delay=settings.retry_delay(retry))

    kopf.on.resume(*RESOURCE, registry=registry, id="resume-butler")(reconcile)
    kopf.on.create(*RESOURCE, registry=registry, id="create-butler")(reconcile)
    kopf.on.update(*RESOURCE, registry=registry, id="update-butler", field="spec")(reconcile)

    @kopf.on.event(*RESOURCE, registry=registry, id="watch-switchboard")
    async def watch_switchboard(
        body: kopf.Body, memo: kopf.Memo, type: str | None, **_: Any
    ) -> None:
        # A switchboard that appears, moves or goes is rendered into every Deployment now.
        if "controller" in memo:
            memo["controller"].start_resync()
            memo["controller"].butlers_changed(body, gone=type == "DELETED")

    @kopf.on.event(
        "apps", "v1", "deployments", registry=registry, id="watch-rollout", labels=MANAGED
    )
    async def watch_rollout(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        if "controller" in memo:
            await memo["controller"].deployment_changed(body)

    @kopf.on.delete(*RESOURCE, registry=registry, id="reclaim-database", when=_reclaims)
    async def reclaim_database(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
        try:
            message = await reclaim_butler(memo["kube"], settings, body)
        except (DatabaseError, *TRANSIENT) as exc:
            delay = settings.retry_delay(retry)
            kopf.warn(body, reason="ReclaimFailed", message=f"{exc}; retrying in {delay:g} s")
            raise kopf.TemporaryError(str(exc), delay=delay) from None
        kopf.info(body, reason="Reclaimed", message=message)

    return registry
