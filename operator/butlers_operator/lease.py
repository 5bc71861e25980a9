"""Leader election: one replica of the operator acts, the others wait.

A `coordination.k8s.io/v1` Lease in the operator's namespace names the replica that
holds it (`holderIdentity`) and when it last renewed. A replica takes the Lease only
when nobody holds it, or the holder let it expire (`leaseDurationSeconds` without a
renewal); every write carries the `resourceVersion` it read, so of two replicas racing
for it the API server lets exactly one win (409 for the other). The holder renews well
within the duration; one that cannot renew before its Lease would expire stops acting
(`LeadershipLost`), since another replica may take over from then on.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
from typing import Any

from butlers_operator.kube import KubeClient, KubeError, build_object_path

log = logging.getLogger(__name__)
LEASE_SECONDS = 15
RENEW_SECONDS = 5.0


class LeadershipLost(RuntimeError):
    """This replica could not renew its Lease in time: another may act now."""


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(tz=datetime.UTC)


def format_time(moment: datetime.datetime) -> str:
    """A MicroTime, as the Lease's fields hold it."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def held_by_another(spec: dict[str, Any], identity: str, now: datetime.datetime) -> bool:
    """Whether someone else holds the Lease and renewed it within its duration."""
    holder = spec.get("holderIdentity")
    if not holder or holder == identity:
        return False
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    duration = datetime.timedelta(seconds=int(spec.get("leaseDurationSeconds") or LEASE_SECONDS))
    return renewed is not None and renewed + duration > now


class LeaderElector:
    """Takes, renews and gives back one Lease for one identity."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = LEASE_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
    ) -> None:
        self.kube = kube
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_seconds, self.renew_seconds = lease_seconds, renew_seconds
        self.path = build_object_path("coordination.k8s.io/v1", "Lease", namespace, name)
        self._renewed_at: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def _spec(self, now: datetime.datetime, acquired: bool, transitions: int) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "renewTime": format_time(now),
        }
        if acquired:
            spec |= {"acquireTime": format_time(now), "leaseTransitions": transitions}
        return spec

    async def try_acquire(self) -> bool:
        """Take or renew the Lease now; False when another replica holds it (or won)."""
        now = utc_now()
        live = await self.kube.get(self.path)
        try:
            if live is None:
                await self.kube.create(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(now, acquired=True, transitions=0),
                    }
                )
            else:
                spec = live.get("spec") or {}
                if held_by_another(spec, self.identity, now):
                    return False
                acquired = spec.get("holderIdentity") != self.identity
                transitions = int(spec.get("leaseTransitions") or 0) + (1 if acquired else 0)
                version = (live.get("metadata") or {}).get("resourceVersion")
                await self.kube.patch(
                    self.path,
                    {
                        "metadata": {"resourceVersion": version},
                        "spec": self._spec(now, acquired, transitions),
                    },
                )
        except KubeError as exc:
            if exc.status == 409:  # another replica wrote it first
                return False
            raise
        self._renewed_at = asyncio.get_running_loop().time()
        return True

    async def acquire(self) -> None:
        """Until this replica holds the Lease."""
        waiting_logged = False
        while not await self.try_acquire():
            if not waiting_logged:
                log.info("Lease %s/%s is held by another replica: standing by", *self.key)
                waiting_logged = True
            await asyncio.sleep(self.renew_seconds * random.uniform(0.8, 1.2))
        log.info("this replica (%s) leads: Lease %s/%s", self.identity, *self.key)

    async def keep(self) -> None:
        """Renew forever; raise LeadershipLost once the Lease may have passed to another."""
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                if await self.try_acquire():
                    continue
                raise LeadershipLost(f"Lease {self.namespace}/{self.name} is held by another")
            except (KubeError, OSError, TimeoutError) as exc:
                since = asyncio.get_running_loop().time() - (self._renewed_at or 0.0)
                if since >= self.lease_seconds - self.renew_seconds:
                    message = f"could not renew the Lease for {since:.0f} s: {exc}"
                    raise LeadershipLost(message) from exc
                log.warning("could not renew the Lease (trying again): %s", exc)

    async def release(self) -> None:
        """Give the Lease back, so a standby replica takes over at once."""
        live = await self.kube.get(self.path)
        if live is None or (live.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        version = (live.get("metadata") or {}).get("resourceVersion")
        try:
            await self.kube.patch(
                self.path,
                {"metadata": {"resourceVersion": version}, "spec": {"holderIdentity": None}},
            )
        except KubeError as exc:
            if exc.status != 409:
                raise
