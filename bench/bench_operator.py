"""Operator benchmark: Butler created → DatabaseReady with every owned object present.

Runs the real operator (kopf, under KopfRunner) against kmock's Kubernetes
emulator and a real PostgreSQL (BUTLERS_DATABASE_URL, or an embedded server).
Prints figures; never fails on timing (exit code 0 unless it cannot run at all).

    .venv/bin/python bench/bench_operator.py [--sequential 20] [--scales 1,10,25,50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import yaml
from kopf.testing import KopfRunner

from butlers.db.embedded import EmbeddedPostgres
from butlers.db.provision import deprovision
from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings

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


def declare_cluster(server: kmock.KubernetesEmulator) -> None:
    server.resources["v1/namespaces"] = kmock.ResourceInfo(kind="Namespace", namespaced=False)
    server.resources[BUTLERS] = kmock.ResourceInfo(
        kind="Butler",
        namespaced=True,
        singular="butler",
        subresources={"status"},
        verbs={"list", "watch", "get", "patch", "create", "delete"},
    )
    for key in [*OWNED, "v1/events"]:
        server.resources[key] = kmock.ResourceInfo(namespaced=True)
    server.objects["v1/namespaces", None, NAMESPACE] = {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "resourceVersion": "1"},
    }  # fmt: skip


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


async def run(args: argparse.Namespace, admin_dsn: str) -> None:
    prefix = f"bench{secrets.token_hex(2)}_"
    names_made: list[str] = []
    async with kmock.KubernetesEmulator() as server, kmock.Server(server):
        declare_cluster(server)
        settings = OperatorSettings(
            namespaces=(NAMESPACE,),
            admin_dsn=admin_dsn,
            schema_prefix=prefix,
            kube_server=str(server.url).rstrip("/"),
            resync_seconds=3600,
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
                port = 41000
                timings = []
                for i in range(args.sequential):
                    name = f"seq{i}"
                    started = time.monotonic()
                    await create(session, name, port + i)
                    await wait_all(server, [name])
                    timings.append(time.monotonic() - started)
                    names_made.append(name)
                timings.sort()
                say(f"create → DatabaseReady + 6 objects, one at a time (n={len(timings)}):")
                say(
                    f"  p50 {statistics.median(timings) * 1000:7.1f} ms   "
                    f"p90 {timings[int(len(timings) * 0.9) - 1] * 1000:7.1f} ms   "
                    f"max {timings[-1] * 1000:7.1f} ms"
                )
                say("burst: N Butlers created at once → all ready")
                baseline = None
                port = 42000
                for batch, count in enumerate(args.scales):
                    names = [f"b{batch}x{i}" for i in range(count)]
                    started = time.monotonic()
                    await asyncio.gather(
                        *(create(session, n, port + i) for i, n in enumerate(names))
                    )
                    await wait_all(server, names)
                    elapsed = time.monotonic() - started
                    names_made.extend(names)
                    port += count
                    per = elapsed / count
                    baseline = baseline or per
                    say(
                        f"  N={count:3d}  total {elapsed * 1000:8.1f} ms   "
                        f"per butler {per * 1000:7.1f} ms   "
                        f"x{per / baseline:4.2f} of N={args.scales[0]} per butler"
                    )
        finally:
            await asyncio.to_thread(runner.__exit__, None, None, None)
    await asyncio.gather(*(deprovision(admin_dsn, f"{prefix}{n}") for n in names_made))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--scales", default="1,10,25,50")
    args = parser.parse_args()
    args.scales = [int(s) for s in args.scales.split(",")]
    root = None
    server = None
    admin_dsn = os.environ.get("BUTLERS_DATABASE_URL")
    try:
        if not admin_dsn:
            root = Path(tempfile.mkdtemp(prefix="butlers-bench-pg-"))
            root.chmod(0o755)
            server = EmbeddedPostgres(root / "postgres", fsync=False)
            server.start()
            admin_dsn = server.admin_dsn()
        asyncio.run(run(args, admin_dsn))
    except Exception as exc:  # a benchmark reports, it never fails the build
        say(f"bench_operator: could not complete: {exc.__class__.__name__}: {exc}")
    finally:
        if server is not None:
            server.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
