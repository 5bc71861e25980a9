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
from butlers_operator.reconcile import (
    Outcome,
    assess,
    find_switchboard_url,
    now_text,
    reconcile_butler,
)
from butlers_operator.settings import OperatorSettings
from butlers_operator.status import (
    DATABASE_READY,
    build_status,
    previous_condition,
    same_status,
)

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)
# Posts a Kubernetes Event about a Butler: (body, type, reason, message).
EventSink = Callable[[Mapping[str, Any], str, str, str], None]


def _butler_path(namespace: str, name: str | None = None) -> str:
    return build_object_path(FULL_API_VERSION, KIND, namespace, name)


def _key(body: Mapping[str, Any]) -> Key:
    return body["metadata"]["namespace"], body["metadata"]["name"]


class Controller:
    """Owns the per-Butler locks and what the operator remembers between passes."""

    def __init__(self, kube: KubeClient, settings: OperatorSettings, events: EventSink) -> None:
        self.kube = kube
        self.settings = settings
        self.events = events
        self._locks: defaultdict[Key, asyncio.Lock] = defaultdict(asyncio.Lock)
        # The switchboard URL each Butler's Deployment was last rendered with.
        self._rendered_switchboard: dict[Key, str | None] = {}
        # The last problem reported per Butler (a hiccup leaves no trace in its status).
        self._warned: dict[Key, tuple[str, str, str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
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
        async with self._locks[key]:
            fresh = await self.kube.get(_butler_path(*key))
            if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                return None
            await self._ensure_dashboard_role()
            outcome = await reconcile_butler(self.kube, self.settings, fresh)
            await self._write_status(fresh, outcome.status)
            self._report(fresh, outcome)
            if outcome.problem is None or outcome.problem.type != DATABASE_READY:
                self._rendered_switchboard[key] = outcome.switchboard_url
        return outcome

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
                assess(database, live),
                previous=previous,
                now=now_text(),
                generation=generation,
            )
            await self._write_status(butler, status)

    async def butlers_changed(self, namespace: str) -> None:
        """A Butler of the namespace appeared, changed or went: when the switchboard is no
        longer the one a Deployment names, render that Deployment again now."""
        butlers = await self.kube.list(_butler_path(namespace))
        current = find_switchboard_url(butlers)
        self._forget(namespace, {_key(body) for body in butlers})
        for body in butlers:
            key = _key(body)
            if key in self._rendered_switchboard and self._rendered_switchboard[key] != current:
                self._spawn(self.reconcile(body))

    def _forget(self, namespace: str, present: set[Key]) -> None:
        """Drop what is remembered about Butlers of the namespace that are gone."""
        for table in (self._rendered_switchboard, self._warned):
            for key in [k for k in table if k[0] == namespace and k not in present]:
                del table[key]
        for key in [k for k in self._locks if k[0] == namespace and k not in present]:
            if not self._locks[key].locked():
                del self._locks[key]

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
            for body in await self.kube.list(path):
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
