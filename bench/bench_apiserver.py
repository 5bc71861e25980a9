"""Real control plane benchmark: cold start, and Butler applied → Ready for 1, 10 and 50.

Cold control plane: etcd, kube-apiserver, controller-manager and scheduler from
the cached binaries (`python3 dev.py kube-binaries`) until all are healthy,
then with the process-kubelet node until it is schedulable. Butler → Ready: the
operator chart installed with helm-python-sdk (the operator runs as a pod),
N Butlers created at once, each timed from its creation to `Ready=True` (its
pod migrated, started and passing its readiness probe). Beside it, in the same
run, what the emulator lane can measure: creation → `DatabaseReady` with every
owned object, on the real API server and on kmock. Prints figures; never fails
on timing (exit code 0 unless it cannot run at all).

    python3 dev.py bench bench_apiserver.py [--starts 3] [--scales 1,10,50]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from _common import run_on_a_database
from bench import bench_operator as kmock_bench
from tests.e2e.harness import userpath
from tests.kube.api import KubeApi, build_path
from tests.kube.cluster import kubelet_scratch, running_cluster
from tests.kube.controlplane import running_control_plane, unavailable_reason
from tests.kube.wait import condition_status, wait_deployment_available

ROOT = Path(__file__).resolve().parents[1]
BUTLERS = "butlers.dev/v1alpha1"
OWNED = (
    ("v1", "secrets", "{}-db"),
    ("v1", "configmaps", "{}-spec"),
    ("v1", "services", "{}"),
    ("v1", "serviceaccounts", "{}"),
    ("apps/v1", "deployments", "{}"),
    ("networking.k8s.io/v1", "networkpolicies", "{}"),
)
DEADLINE = 600.0
KMOCK_DEADLINE = 180.0


def say(*parts: object) -> None:
    print(*parts, file=sys.__stdout__, flush=True)


def butler(name: str, port: int) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())
    document["metadata"]["name"] = name
    document["spec"]["port"] = port
    return document


async def cold_starts(count: int) -> tuple[list[float], list[float]]:
    """(control plane healthy, node schedulable too) in seconds, `count` times."""
    planes, clusters = [], []
    for _ in range(count):
        with kubelet_scratch("butlers-bench-cp-") as root:
            started = time.monotonic()
            async with running_control_plane(root / "cp"):
                planes.append(time.monotonic() - started)
        with kubelet_scratch("butlers-bench-cluster-") as root:
            started = time.monotonic()
            async with running_cluster(root):
                clusters.append(time.monotonic() - started)
    return planes, clusters


async def watch_butlers(
    kube: KubeApi, namespace: str, names: list[str], started: float
) -> dict[str, dict[str, float]]:
    """Per Butler: seconds from `started` to DatabaseReady + owned objects, and to Ready."""
    times: dict[str, dict[str, float]] = {n: {} for n in names}
    deadline = started + DEADLINE
    while any("ready" not in t for t in times.values()):
        if time.monotonic() > deadline:
            missing = [n for n, t in times.items() if "ready" not in t]
            raise TimeoutError(
                f"{len(missing)} of {len(names)} Butlers not Ready after {DEADLINE:.0f} s"
            )
        listing = await kube.list(build_path(BUTLERS, "butlers", namespace))
        # One list per owned kind, not a GET per object: under load a pass over 50 Butlers'
        # 300 objects took longer than the burst itself and stamped them all at its end.
        present = {
            (group, plural): {
                o["metadata"]["name"] for o in await kube.list(build_path(group, plural, namespace))
            }
            for group, plural, _ in OWNED
        }
        now = time.monotonic() - started
        for body in listing:
            name = body["metadata"]["name"]
            if name not in times:
                continue
            if (
                "database" not in times[name]
                and condition_status(body, "DatabaseReady") == "True"
                and all(n.format(name) in present[(g, p)] for g, p, n in OWNED)
            ):
                times[name]["database"] = now
            if "ready" not in times[name] and condition_status(body, "Ready") == "True":
                times[name]["ready"] = now
                times[name].setdefault("database", now)
        await asyncio.sleep(0.1)
    return times


async def apiserver_scales(scales: list[int], admin_dsn: str) -> list[dict[str, Any]]:
    rows = []
    with kubelet_scratch("butlers-bench-") as root:
        async with running_cluster(root) as cluster, cluster.api() as kube:
            await userpath.install_crds(userpath.Cluster("default", cluster.kubeconfig))
            for batch, count in enumerate(scales):
                namespace = f"bench-{batch}-{secrets.token_hex(2)}"
                target = userpath.Cluster(namespace, cluster.kubeconfig)
                await kube.create(
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
                await userpath.apply(
                    target, [userpath.build_secret("bench-admin", namespace, {"dsn": admin_dsn})]
                )
                prefix = f"bch{batch}{secrets.token_hex(2)}_"
                await userpath.install_operator(
                    target,
                    {"database": {"adminSecret": {"name": "bench-admin"}, "schemaPrefix": prefix}},
                )
                await wait_deployment_available(kube, namespace, f"{userpath.RELEASE}-operator")
                names = [f"b{i}" for i in range(count)]
                started = time.monotonic()
                await asyncio.gather(
                    *(
                        kube.create(build_path(BUTLERS, "butlers", namespace), butler(n, 42000 + i))
                        for i, n in enumerate(names)
                    )
                )
                try:
                    times = await watch_butlers(kube, namespace, names, started)
                    rows.append(
                        {"count": count, "times": times, "total": time.monotonic() - started}
                    )
                except TimeoutError as exc:
                    rows.append({"count": count, "error": str(exc)})
                await userpath.teardown(target, deadline=300)
                await kmock_bench_cleanup(admin_dsn, prefix, names)
    return rows


async def kmock_bench_cleanup(admin_dsn: str, prefix: str, names: list[str]) -> None:
    from butlers.db.provision import deprovision

    await asyncio.gather(
        *(deprovision(admin_dsn, f"{prefix}{n}") for n in names), return_exceptions=True
    )


async def kmock_scales(scales: list[int], admin_dsn: str) -> dict[int, float | str]:
    """Per-Butler p50 seconds to DatabaseReady + objects on kmock, per N (created at once);
    what went wrong instead, when a burst does not finish in KMOCK_DEADLINE."""
    results: dict[int, float | str] = {}
    prefix = f"bkm{secrets.token_hex(2)}_"
    made: list[str] = []
    try:
        for batch, count in enumerate(scales):
            names = [f"k{batch}x{i}" for i in range(count)]
            async with kmock_bench.operator_on_emulator(admin_dsn, prefix) as (server, session):
                started = time.monotonic()
                await asyncio.gather(
                    *(kmock_bench.create(session, n, 43000 + i) for i, n in enumerate(names))
                )
                made.extend(names)
                done: dict[str, float] = {}
                while len(done) < count and time.monotonic() - started < KMOCK_DEADLINE:
                    for n in names:
                        if n not in done and kmock_bench.is_done(server, n):
                            done[n] = time.monotonic() - started
                    # Polling shares the loop with the emulator: poll gently, more so for many.
                    await asyncio.sleep(min(0.005 * (count - len(done)), 0.1))
            if len(done) < count:
                results[count] = (
                    f"{count - len(done)} of {count} not done after {KMOCK_DEADLINE:.0f} s"
                )
            else:
                results[count] = statistics.median(done.values())
    finally:
        await kmock_bench_cleanup(admin_dsn, prefix, made)
    return results


def cell(value: float | str | None) -> str:
    return value if isinstance(value, str) else seconds(value)


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:6.2f} s"


async def run(args: argparse.Namespace, admin_dsn: str) -> None:
    planes, clusters = await cold_starts(args.starts)
    if planes:
        say(f"cold control plane from cached binaries (n={len(planes)}), goal ≤ 15 s:")
    for what, values in (("components healthy", planes), ("and the node schedulable", clusters)):
        if values:
            say(f"  {what:24} p50 {statistics.median(values):5.2f} s  max {max(values):5.2f} s")
    kmock = await kmock_scales(args.scales, admin_dsn)
    rows = await apiserver_scales(args.scales, admin_dsn)
    say("N Butlers created at once; per-Butler p50 from creation:")
    say(
        "| N | kmock: DatabaseReady + objects | apiserver: DatabaseReady + objects "
        "| vs N=1 | all DatabaseReady | apiserver: Ready | vs N=1 | all Ready |"
    )
    say("|---|---|---|---|---|---|---|---|")
    base: tuple[float, float] | None = None
    for row in rows:
        count = row["count"]
        if "error" in row:
            say(f"| {count} | {cell(kmock.get(count))} | {row['error']} | | | | | |")
            continue
        times = row["times"].values()
        database = statistics.median(t["database"] for t in times)
        ready = statistics.median(t["ready"] for t in times)
        base = base or (database, ready)
        say(
            f"| {count} | {cell(kmock.get(count))} | {seconds(database)} "
            f"| x{database / base[0]:.2f} | {max(t['database'] for t in times):.1f} s "
            f"| {seconds(ready)} | x{ready / base[1]:.2f} | {row['total']:.1f} s |"
        )
    say("goals: Butler → Ready p50 ≤ 3 s; N=50 within 3× the per-Butler time of N=1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="cold control-plane starts to time")
    parser.add_argument("--scales", default="1,10,50")
    args = parser.parse_args()
    args.scales = [int(s) for s in args.scales.split(",")]
    reason = unavailable_reason()
    if reason:
        say(f"bench_apiserver: skipped: {reason}")
        return 0
    return run_on_a_database("bench_apiserver", lambda admin_dsn: run(args, admin_dsn))


if __name__ == "__main__":
    sys.exit(main())
