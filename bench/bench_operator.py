"""Operator benchmark: Butler created → DatabaseReady with every owned object present.

Runs the real operator (kopf, under KopfRunner) against kmock's Kubernetes
emulator and a real PostgreSQL (BUTLERS_DATABASE_URL, or an embedded server).
Prints figures; never fails on timing (exit code 0 unless it cannot run at all).

    python3 dev.py bench bench_operator.py [--sequential 20] [--scales 1,10,25,50] [--repeats 3]

The emulator moves resourceVersions and matches each request in constant time
(tests/support/kube_emulator.py says why both matter); the last lines count the
write requests of one resync of the largest N, all done and unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import yaml
from kopf.testing import KopfRunner

from _common import run_on_a_database
from butlers.db.provision import deprovision
from butlers_operator import controller
from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings
from butlers_operator.target import build_schema_name
from tests.support.kube_emulator import VersionedEmulator, declare_cluster

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
BUTLERS = "butlers.dev/v1alpha1/butlers"
OWNED = {
    "v1/secrets": "{}-db",
    "v1/configmaps": "{}-spec",
    "v1/services": "{}",
    "v1/serviceaccounts": "{}",
    "apps/v1/deployments": "{}",
    "networking.k8s.io/v1/networkpolicies": "{}",
}
DEADLINE = 120.0


def say(*parts: object) -> None:
    """Print past KopfRunner, which captures sys.stdout while the operator runs."""
    print(*parts, file=sys.__stdout__, flush=True)


def _present(server: kmock.KubernetesEmulator, key: tuple[str, str | None, str]) -> Any:
    try:
        obj = server.objects[key]
    except KeyError:
        return None
    return None if obj.deleted else obj


def is_done(server: kmock.KubernetesEmulator, name: str) -> bool:
    butler = _present(server, (BUTLERS, NAMESPACE, name))
    if butler is None:
        return False
    conditions = (butler.get("status") or {}).get("conditions") or []
    if not any(c["type"] == "DatabaseReady" and c["status"] == "True" for c in conditions):
        return False
    return all(_present(server, (r, NAMESPACE, n.format(name))) for r, n in OWNED.items())


async def create(session: aiohttp.ClientSession, name: str, port: int) -> None:
    document = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())
    document["metadata"] |= {
        "name": name, "namespace": NAMESPACE, "uid": f"uid-{name}",
        "generation": 1, "resourceVersion": "1",
    }  # fmt: skip
    document["spec"]["port"] = port
    path = f"/apis/{BUTLERS.rsplit('/', 1)[0]}/namespaces/{NAMESPACE}/butlers"
    async with session.post(path, json=document) as resp:
        resp.raise_for_status()


async def wait_all(server: kmock.KubernetesEmulator, names: list[str]) -> float:
    started = time.monotonic()
    pending = set(names)
    while pending:
        pending = {n for n in pending if not is_done(server, n)}
        if time.monotonic() - started > DEADLINE:
            raise TimeoutError(
                f"{len(pending)} of {len(names)} butlers not ready after {DEADLINE} s"
            )
        # Polling shares the loop with the emulator: poll gently, more so for many.
        await asyncio.sleep(min(0.005 * len(pending), 0.1))
    return time.monotonic() - started


class ReconcileClock:
    """Time spent inside the operator's reconciler (database + API calls), per call."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._original = controller.reconcile_butler

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await self._original(*args, **kwargs)
        finally:
            self.durations.append(time.monotonic() - started)


@contextlib.asynccontextmanager
async def operator_on_emulator(
    admin_dsn: str, prefix: str, resync_seconds: float = 3600
) -> AsyncIterator[Any]:
    """A fresh emulator and a fresh operator: every measurement starts from an empty API."""
    async with VersionedEmulator(recent_only=True) as server, kmock.Server(server):
        declare_cluster(server, NAMESPACE)
        settings = OperatorSettings(
            namespaces=(NAMESPACE,),
            admin_dsn=admin_dsn,
            schema_prefix=prefix,
            kube_server=str(server.url).rstrip("/"),
            resync_seconds=resync_seconds,
        )
        runner = KopfRunner(
            ["run", "--standalone", "--namespace", NAMESPACE, "--quiet"],
            registry=build_registry(settings),
            settings=build_kopf_settings(settings),
            timeout=60,
        )
        runner.__enter__()
        try:
            async with aiohttp.ClientSession(base_url=str(server.url)) as session:
                yield server, session
        finally:
            await asyncio.to_thread(runner.__exit__, None, None, None)


WRITES = {"POST", "PUT", "PATCH", "DELETE"}


def _method(request: Any) -> str:
    return str(getattr(request.method, "value", request.method)).upper()


async def burst(admin_dsn: str, prefix: str, names: list[str]) -> float:
    """Seconds from creating `names` at once (on a fresh emulator and operator) to all done."""
    async with operator_on_emulator(admin_dsn, prefix) as (server, session):
        started = time.monotonic()
        await asyncio.gather(*(create(session, n, 42000 + i) for i, n in enumerate(names)))
        await wait_all(server, names)
        return time.monotonic() - started


async def resync_writes(admin_dsn: str, prefix: str, names: list[str]) -> tuple[int, int]:
    """Write requests the operator makes during one whole resync of `names`, all done and
    unchanged; and how many Butler reads that resync made (it did look at each)."""
    async with operator_on_emulator(admin_dsn, prefix, resync_seconds=1.0) as (server, session):
        await asyncio.gather(*(create(session, n, 42000 + i) for i, n in enumerate(names)))
        await wait_all(server, names)
        listing = f"/apis/{BUTLERS.rsplit('/', 1)[0]}/namespaces/{NAMESPACE}/butlers"

        def lists() -> list[int]:  # indexes of the resync's list requests
            return [
                i
                for i, r in enumerate(server._requests)
                if _method(r) == "GET" and str(r.url.path) == listing
            ]

        async def next_list(after: int) -> int:
            deadline = time.monotonic() + DEADLINE
            while not (found := [i for i in lists() if i > after]):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no resync within {DEADLINE} s")
                await asyncio.sleep(0.05)
            return found[0]

        # A resync is everything between one of its lists and the next one's.
        first = await next_list(len(server._requests))
        second = await next_list(first)
        between = server._requests[first:second]
        writes = sum(1 for r in between if _method(r) in WRITES)
        reads = sum(1 for r in between if str(r.url.path).startswith(listing + "/"))
        return writes, reads


def _ms(values: list[float], q: float) -> str:
    ordered = sorted(values)
    return f"{ordered[min(int(len(ordered) * q), len(ordered) - 1)] * 1000:7.1f} ms"


async def run(args: argparse.Namespace, admin_dsn: str) -> None:
    prefix = f"bench{secrets.token_hex(2)}_"
    made: list[str] = []
    clock = ReconcileClock()
    controller.reconcile_butler = clock
    try:
        async with operator_on_emulator(admin_dsn, prefix) as (server, session):
            timings = []
            for i in range(args.sequential):
                name = f"seq{i}"
                started = time.monotonic()
                await create(session, name, 41000 + i)
                made.append(name)
                await wait_all(server, [name])
                timings.append(time.monotonic() - started)
        say(f"create → DatabaseReady + 6 objects, one at a time (n={len(timings)}):")
        say(f"  end to end  p50 {_ms(timings, 0.5)}  p90 {_ms(timings, 0.9)}")
        say(
            f"  reconciler  p50 {_ms(clock.durations, 0.5)}  p90 {_ms(clock.durations, 0.9)}"
            f"  ({len(clock.durations)} calls)"
        )
        say(
            f"burst: N Butlers created at once on a fresh emulator → all ready; "
            f"the scales interleaved, {args.repeats} round(s); per Butler = total / N, "
            f"ratio against N={args.scales[0]} of the same round"
        )
        rows: dict[int, list[tuple[float, float]]] = {n: [] for n in args.scales}
        for round_ in range(args.repeats):
            base = None
            for count in args.scales:
                names = [f"r{round_}n{count}x{i}" for i in range(count)]
                made.extend(names)
                try:
                    per = await burst(admin_dsn, prefix, names) / count
                except TimeoutError as exc:
                    say(f"  round {round_ + 1} N={count:3d}  {exc}")
                    base = None if count == args.scales[0] else base
                    continue
                base = base or per
                rows[count].append((per, per / base))
        say("| N | per Butler (median) | vs N=1 (median) | spread of the ratio | rounds |")
        say("|---|---|---|---|---|")
        for count, samples in rows.items():
            if not samples:
                say(f"| {count} | — | — | — | 0 |")
                continue
            ratios = [r for _, r in samples]
            say(
                f"| {count} | {statistics.median(p for p, _ in samples) * 1000:.1f} ms "
                f"| x{statistics.median(ratios):.2f} | x{min(ratios):.2f}–x{max(ratios):.2f} "
                f"| {len(samples)} |"
            )
        count = max(args.scales)
        names = [f"rs{i}" for i in range(count)]
        made.extend(names)
        writes, reads = await resync_writes(admin_dsn, prefix, names)
        say(
            f"resync of {count} unchanged Butlers: {writes} write request(s), "
            f"{reads} Butler read(s) (goal: 0 writes)"
        )
    finally:
        controller.reconcile_butler = clock._original
        await asyncio.gather(
            *(deprovision(admin_dsn, build_schema_name(NAMESPACE, n, prefix)) for n in made),
            return_exceptions=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--scales", default="1,10,25,50")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.scales = [int(s) for s in args.scales.split(",")]
    return run_on_a_database("bench_operator", lambda admin_dsn: run(args, admin_dsn))


if __name__ == "__main__":
    sys.exit(main())
