"""The operator's state between kopf events: one reconcile at a time per Butler, status
writes that never go back in time, events only when something changes.

Every path that touches a Butler's status (a create/update/resume, the resync loop,
a Deployment's rollout, another Butler becoming the switchboard) goes through one
per-Butler lock and reads the Deployment inside it, so the last write is always from
the freshest view. kopf's own `patch.status` is not used for that reason.

The resync loop is a task of the operator, not a kopf timer: kopf puts a finalizer on
every object a timer serves, and a Butler must carry one only when its deletion has
work to do (`reclaimPolicy: Delete`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from butlers.errors import DatabaseError
from butlers.spec import FULL_API_VERSION, KIND
from butlers_operator.dashboard import DashboardDatabase
from butlers_operator.kube import KubeClient, KubeError, build_object_path
from butlers_operator.metrics import OperatorMetrics
from butlers_operator.reconcile import (
    Outcome,
    assess,
    now_text,
    read_pods,
    reconcile_butler,
)
from butlers_operator.settings import OperatorSettings
from butlers_operator.status import (
    DATABASE_READY,
    build_status,
    previous_condition,
    same_status,
)
from butlers_operator.switchboards import SwitchboardIndex

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)
# Butlers reconciled at once. A burst of N Butlers otherwise runs N passes in lockstep:
# all of them finish near the end (the median Butler waits for the last), their requests
# queue for the client's connections until they time out (then kopf backs off 5, 10, 20 s…).
RECONCILE_CONCURRENCY = 8
# Posts a Kubernetes Event about a Butler: (body, type, reason, message).
EventSink = Callable[[Mapping[str, Any], str, str, str], None]


def _error_reason(exc: Exception) -> str:
    """A failed pass's reason for the metrics: the API's status, or the error's kind."""
    if isinstance(exc, KubeError):
        return f"KubernetesAPI{exc.status}"
    return str(getattr(exc, "reason", None) or type(exc).__name__)


def _butler_path(namespace: str, name: str | None = None) -> str:
    return build_object_path(FULL_API_VERSION, KIND, namespace, name)


def _key(body: Mapping[str, Any]) -> Key:
    return body["metadata"]["namespace"], body["metadata"]["name"]


def _ref(namespace: str, name: str) -> dict[str, Any]:
    """What `Controller.reconcile` needs of a Butler: it reads the rest itself."""
    return {"metadata": {"namespace": namespace, "name": name}}


class Controller:
    """Owns the per-Butler locks and what the operator remembers between passes."""

    def __init__(self, kube: KubeClient, settings: OperatorSettings, events: EventSink) -> None:
        self.kube = kube
        self.settings = settings
        self.events = events
        self._locks: defaultdict[Key, asyncio.Lock] = defaultdict(asyncio.Lock)
        # Where each namespace's switchboard is, from the Butler watch (no list per event).
        self.switchboards = SwitchboardIndex(kube)
        # The switchboard URL each Butler's Deployment was last rendered with.
        self._rendered_switchboard: dict[Key, str | None] = {}
        # The last problem reported per Butler (a hiccup leaves no trace in its status).
        self._warned: dict[Key, tuple[str, str, str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._working = asyncio.Semaphore(RECONCILE_CONCURRENCY)
        self._resync: asyncio.Task[None] | None = None
        self.metrics = OperatorMetrics()
        # The dashboard's database role (when the chart enables the dashboard).
        self.dashboard = DashboardDatabase(kube, settings)

    def start(self) -> None:
        """Start-up work in the background: the dashboard's role, so it starts without Butlers."""
        if self.dashboard.enabled:
            self._spawn(self.dashboard.ensure_until_done())

    async def _ensure_dashboard_role(self) -> None:
        """Before a butler migrates, the role it grants reads to must exist; a failure here
        is the dashboard's problem, never the butler's."""
        try:
            await self.dashboard.ensure()
        except (DatabaseError, KubeError, OSError) as exc:
            log.warning("the dashboard's database role is not ready: %s", exc)

    async def reconcile(self, body: Mapping[str, Any]) -> Outcome | None:
        """One pass for the Butler (its latest version); None when it is gone or going."""
        key = _key(body)
        async with self._locks[key], self._working:
            fresh = await self.kube.get(_butler_path(*key))
            if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                return None
            await self._ensure_dashboard_role()
            try:
                outcome = await reconcile_butler(
                    self.kube, self.settings, fresh, self.switchboards.find
                )
            except Exception as exc:
                self.metrics.failed(_error_reason(exc))
                raise
            problem = outcome.problem.reason if outcome.problem else None
            self.metrics.passed(key, outcome.status.get("phase"), problem)
            await self._write_status(fresh, outcome.status)
            self._report(fresh, outcome)
            if outcome.rendered:
                self._rendered_switchboard[key] = outcome.switchboard_url
        if outcome.rendered and self._stale(key):
            # The switchboard moved while this pass rendered: render again with the new one.
            self._spawn(self.reconcile(_ref(*key)))
        return outcome

    def _stale(self, key: Key) -> bool:
        """Whether the Butler's Deployment names another switchboard than the current one."""
        namespace = key[0]
        if key not in self._rendered_switchboard or not self.switchboards.loaded(namespace):
            return False
        current = self.switchboards.current(namespace)
        return self._rendered_switchboard[key] != (current[1] if current else None)

    async def _write_status(self, body: Mapping[str, Any], status: dict[str, Any]) -> None:
        if status and not same_status(body.get("status"), status):
            await self.kube.patch_status(_butler_path(*_key(body)), status)

    def _report(self, body: Mapping[str, Any], outcome: Outcome) -> None:
        for verb, what in outcome.actions:
            self.events(body, "Normal", verb.capitalize(), f"{verb} {what}")
        key, problem = _key(body), outcome.problem
        if problem is None:
            self._warned.pop(key, None)
            return
        signature = (problem.type, problem.reason, problem.message)
        before = previous_condition(body.get("status"), problem.type)
        shown = before is not None and (before.reason, before.message) == signature[1:]
        if shown or self._warned.get(key) == signature:
            return  # already reported: a Warning only when the problem changes
        self._warned[key] = signature
        self.events(body, "Warning", problem.reason, problem.message)

    async def deployment_changed(self, deployment: Mapping[str, Any]) -> None:
        """A Deployment the operator owns changed: bring its Butler's Ready up to date."""
        owner = next(
            (
                ref
                for ref in deployment["metadata"].get("ownerReferences") or []
                if ref.get("kind") == KIND and ref.get("controller")
            ),
            None,
        )
        if owner is None:
            return
        key = (deployment["metadata"]["namespace"], owner["name"])
        async with self._locks[key]:
            butler = await self.kube.get(_butler_path(*key))
            if butler is None or butler["metadata"].get("uid") != owner.get("uid"):
                return
            previous = butler.get("status") or {}
            generation = butler["metadata"].get("generation")
            database = previous_condition(previous, DATABASE_READY)
            if database is None or previous.get("observedGeneration") != generation:
                return  # a reconcile of this generation is under way and will write it
            live = await self.kube.get(
                build_object_path("apps/v1", "Deployment", key[0], deployment["metadata"]["name"])
            )
            status = build_status(
                assess(database, live, await read_pods(self.kube, live)),
                previous=previous,
                now=now_text(),
                generation=generation,
            )
            await self._write_status(butler, status)
            self.metrics.phase(key, status.get("phase"))

    def butlers_changed(self, body: Mapping[str, Any], gone: bool = False) -> None:
        """A Butler appeared, changed or went (a watch event): when the namespace's
        switchboard is no longer the one a Deployment names, render that Deployment again.
        No API call: the index is kept from these events."""
        namespace, name = _key(body)
        self.switchboards.observe(body, gone)
        if gone:
            self._forget(namespace, name)
            self.metrics.forget((namespace, name))
        for key in [k for k in self._rendered_switchboard if k[0] == namespace]:
            if self._stale(key):
                self._spawn(self.reconcile(_ref(*key)))

    def _forget(self, namespace: str, name: str) -> None:
        """Drop what is remembered about a Butler that is gone."""
        key = (namespace, name)
        self._rendered_switchboard.pop(key, None)
        self._warned.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    def start_resync(self) -> None:
        """Start the resync loop, once: from a kopf handler, so that its task inherits the
        context kopf posts Events from (a task started at kopf's startup has none, and
        every Event a resync reported raised LookupError after its pass had done the work).
        """
        if self._resync is None:
            self._resync = asyncio.create_task(self.resync_forever(), name="resync")
            self._tasks.add(self._resync)

    async def resync_forever(self) -> None:
        """Every `resync_seconds`: reconcile every served Butler (drift, rotated Secrets)."""
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            try:
                await self.resync_once()
            except Exception:
                log.exception("resync failed; trying again in %s s", self.settings.resync_seconds)

    async def resync_once(self) -> None:
        if self.settings.cluster_wide:
            paths = [build_object_path(FULL_API_VERSION, KIND, None)]
        else:
            paths = [_butler_path(ns) for ns in self.settings.namespaces]
        for path in paths:
            since = self.switchboards.tick()
            butlers = await self.kube.list(path)
            by_namespace: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
            for body in butlers:
                by_namespace[body["metadata"]["namespace"]].append(body)
            if not self.settings.cluster_wide:
                by_namespace.setdefault(path.split("/namespaces/")[1].split("/")[0], [])
            for namespace, bodies in by_namespace.items():
                self.switchboards.replace(namespace, bodies, since)
            # At once (`reconcile` bounds how many run): each mostly waits on I/O.
            await asyncio.gather(*(self._resync_one(body) for body in butlers))

    async def _resync_one(self, body: Mapping[str, Any]) -> None:
        try:
            await self.reconcile(body)
        except Exception:
            meta = body["metadata"]
            log.exception("resync of Butler %s/%s failed", meta["namespace"], meta["name"])

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a background reconcile failed", exc_info=task.exception())

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
