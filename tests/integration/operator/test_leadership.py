"""Leader election over a Lease: one replica holds it, a standby takes over when the
holder gives it back or lets it expire, and a holder that lost it stops."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
import kmock as kmock_module
import kopf
import pytest

from butlers.db.embedded import free_port
from butlers_operator.__main__ import Leadership
from butlers_operator.kube import KubeClient
from butlers_operator.lease import LeaderElector, LeadershipLost, format_time, utc_now

from .conftest import NAMESPACE, Cluster, eventually

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/butlers-operator"


@pytest.fixture
def kube(kmock: Any, make_settings: Any) -> KubeClient:
    """A client of the emulator, which now serves Leases (`make_settings` declares the rest)."""
    kmock.resources["coordination.k8s.io/v1/leases"] = kmock_module.ResourceInfo(
        kind="Lease", namespaced=True
    )
    server = str(kmock.url).rstrip("/")
    return KubeClient(lambda: kopf.ConnectionInfo(server=server, insecure=True))


def _elector(kube: KubeClient, identity: str, lease_seconds: int = 2) -> LeaderElector:
    return LeaderElector(
        kube, NAMESPACE, "butlers-operator", identity, lease_seconds, renew_seconds=0.2
    )


async def test_one_replica_holds_the_lease_until_it_gives_it_back(
    kube: KubeClient, cluster: Cluster
) -> None:
    first, second = _elector(kube, "replica-a"), _elector(kube, "replica-b")
    try:
        assert await first.try_acquire()
        assert not await second.try_acquire()
        assert await first.try_acquire()  # renewing
        lease = await cluster.get(LEASE) or {}
        assert lease["spec"]["holderIdentity"] == "replica-a"
        await first.release()
        assert await second.try_acquire()
        assert not await first.try_acquire()
        lease = await cluster.get(LEASE) or {}
        assert lease["spec"]["holderIdentity"] == "replica-b"
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        await kube.close()


async def test_a_standby_takes_over_an_expired_lease(kube: KubeClient) -> None:
    crashed, standby = _elector(kube, "replica-a", lease_seconds=1), _elector(kube, "replica-b")
    try:
        assert await crashed.try_acquire()  # then never renews
        await asyncio.wait_for(standby.acquire(), timeout=10)
        assert not await crashed.try_acquire()
    finally:
        await kube.close()


async def test_a_holder_that_lost_the_lease_stops(kube: KubeClient, cluster: Cluster) -> None:
    holder = _elector(kube, "replica-a")
    try:
        assert await holder.try_acquire()
        keeping = asyncio.create_task(holder.keep())
        await asyncio.sleep(0.5)
        assert not keeping.done()
        # Another replica took it (it found the Lease expired during a long pause of ours).
        await cluster.patch(
            LEASE, {"spec": {"holderIdentity": "replica-b", "renewTime": format_time(utc_now())}}
        )
        with pytest.raises(LeadershipLost, match="held by another"):
            await asyncio.wait_for(keeping, timeout=5)
    finally:
        await kube.close()


async def test_the_lease_appears_in_the_cluster(kube: KubeClient, cluster: Cluster) -> None:
    elector = _elector(kube, "replica-a")
    try:
        await elector.acquire()
        lease = await eventually(lambda: cluster.get(LEASE), "the Lease")
        assert lease["spec"]["leaseDurationSeconds"] == 2
    finally:
        await kube.close()


async def test_a_standby_answers_liveness_leads_after_the_holder_and_stops_when_it_loses(
    kube: KubeClient, cluster: Cluster, make_settings: Any
) -> None:
    """The process around kopf (`__main__.Leadership`): standing by it serves the liveness
    probe; once the holder gives the Lease back it leads; losing it sets kopf's stop flag."""
    holder = _elector(kube, "replica-a", lease_seconds=30)
    assert await holder.try_acquire()
    probe = f"http://127.0.0.1:{free_port()}/healthz"
    settings = make_settings(
        lease_name="butlers-operator",
        identity="replica-b",
        operator_namespace=NAMESPACE,
        liveness_endpoint=probe,
    )
    stop_flag = threading.Event()
    leadership = Leadership(settings, stop_flag)
    waiting = asyncio.create_task(leadership.wait())
    try:
        async with aiohttp.ClientSession() as http:

            async def alive() -> bool:
                try:
                    async with http.get(probe) as response:
                        return response.status == 200
                except aiohttp.ClientError:
                    return False

            await eventually(alive, "the standby's liveness probe")
        assert not waiting.done()
        await holder.release()
        await asyncio.wait_for(waiting, timeout=20)
        lease = await cluster.get(LEASE) or {}
        assert lease["spec"]["holderIdentity"] == "replica-b"
        leadership.start_renewing()
        await cluster.patch(
            LEASE, {"spec": {"holderIdentity": "replica-c", "renewTime": format_time(utc_now())}}
        )
        await asyncio.to_thread(stop_flag.wait, 20)
        assert stop_flag.is_set()
        assert "held by another" in (leadership.stop() or "")
    finally:
        waiting.cancel()
        leadership.stop()
        await kube.close()


async def test_a_stop_while_the_lost_lease_closes_its_client_ends_the_thread_cleanly(
    kube: KubeClient, cluster: Cluster, make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Losing the Lease sets kopf's stop flag, and kopf's exit calls `stop()` while the
    renewing thread is still closing its client: that close runs to its end, and the
    thread ends without an exception (pytest fails the test on one)."""
    closing = threading.Event()
    original_close = KubeClient.close

    async def slow_close(self: KubeClient) -> None:
        closing.set()
        await asyncio.sleep(0.5)
        await original_close(self)

    settings = make_settings(
        lease_name="butlers-operator",
        identity="replica-b",
        operator_namespace=NAMESPACE,
        liveness_endpoint=f"http://127.0.0.1:{free_port()}/healthz",
    )
    stop_flag = threading.Event()
    leadership = Leadership(settings, stop_flag)
    await asyncio.wait_for(leadership.wait(), timeout=20)
    monkeypatch.setattr(KubeClient, "close", slow_close)
    leadership.start_renewing()
    await cluster.patch(
        LEASE, {"spec": {"holderIdentity": "replica-c", "renewTime": format_time(utc_now())}}
    )
    await asyncio.to_thread(closing.wait, 20)
    assert stop_flag.is_set()
    assert "held by another" in (leadership.stop() or "")
    assert leadership._thread is not None and not leadership._thread.is_alive()
