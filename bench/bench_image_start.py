"""Butler container start -> `/ready` 200, against the same `butlers serve` as a local process.

The pod is what the operator renders for roster/health.yaml (on a free port, in an
embedded PostgreSQL, migrated once by the rendered `migrate` container). Each round
starts, in turn:
- local: the rendered command and environment as a process of this machine (the
  development venv, bytecode cached): the baseline;
- container: the butler image as the Deployment runs it (`docker run` of the rendered
  pod: read-only root, user 10001, tmpfs /tmp, host network);
- no bytecode: the same container told to ignore the image's bytecode
  (PYTHONPYCACHEPREFIX), i.e. an image that compiles every module at each start.
Wall time from launch to the first 200, and CPU seconds used by then (the process's,
or the container cgroup's); then, after IDLE seconds of nothing, the RSS of the butler
process (in the container: every process of its cgroup, which is the butler alone).
Goals (issue 14): a pod Ready <= 3 s after its container starts; idle RSS <= 90 MB.
Needs a Docker engine (started or installed as for the images lane); prints
figures and ratios, never fails on timing.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2 as httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the `images` package lives at the repository root

from butlers.db.embedded import EmbeddedPostgres, free_port  # noqa: E402
from butlers.roster import load_butler_file  # noqa: E402
from images.base import ensure_bases  # noqa: E402
from images.build import build_image, content_key  # noqa: E402
from images.engine import EngineUnavailable, ensure_engine  # noqa: E402
from tests.support.docker_pods import DockerPod, RenderedPod, render_butler_pod  # noqa: E402
from tests.support.scratch import scratch_dir  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
IDLE = 3.0  # seconds after Ready before the idle RSS is read
TICKS = os.sysconf("SC_CLK_TCK")
Sample = tuple[float, float | None, float | None]  # wall s, CPU s, idle RSS MB (None: unknown)


async def wait_ready(url: str, alive: Callable[[], Awaitable[bool]], timeout: float = 60) -> float:
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.perf_counter() - started < timeout:
            try:
                if (await client.get(url)).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            if not await alive():
                raise RuntimeError(f"exited before {url} answered")
            await asyncio.sleep(0.02)
    raise RuntimeError(f"{url} not ready after {timeout} s")


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def process_rss(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for row in status.splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return None


def _container_id(name: str) -> str:
    return subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True
    ).stdout.strip()


def container_rss(name: str) -> float | None:
    """The summed RSS of the container's processes (host pids from its cgroup)."""
    cid = _container_id(name)
    for directory in (
        f"/sys/fs/cgroup/system.slice/docker-{cid}.scope",
        f"/sys/fs/cgroup/docker/{cid}",
        f"/sys/fs/cgroup/memory/docker/{cid}",
    ):
        try:
            pids = [int(p) for p in Path(directory, "cgroup.procs").read_text().split()]
        except OSError:
            continue
        sizes = [process_rss(pid) for pid in pids]
        return sum(size for size in sizes if size is not None) if pids else None
    return None


def container_cpu(name: str) -> float | None:
    cid = _container_id(name)
    for path, scale in (
        (f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage", 1e-9),  # cgroup v1
        (f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat", 1e-6),  # v2, systemd
        (f"/sys/fs/cgroup/docker/{cid}/cpu.stat", 1e-6),  # v2, cgroupfs
    ):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        value = text.split()[1] if text.startswith("usage_usec") else text.split()[0]
        return int(value) * scale
    return None


def write_files(files: dict[str, str]) -> None:
    for path, content in files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)


async def local_start(rendered: RenderedPod, workdir: Path) -> Sample:
    launch = rendered.pod(workdir).launches()[-1].relocate(str(workdir / "local"))
    await asyncio.to_thread(write_files, launch.files)
    argv = [str(Path(sys.executable).parent / launch.argv[0]), *launch.argv[1:]]
    env = {"PATH": os.environ["PATH"], "HOME": str(workdir), **launch.env}
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )

    async def alive() -> bool:
        return process.returncode is None

    try:
        await wait_ready(f"http://127.0.0.1:{rendered.port}/ready", alive)
        wall = time.perf_counter() - started
        cpu = process_cpu(process.pid)
        await asyncio.sleep(IDLE)
        return wall, cpu, process_rss(process.pid)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def container_start(pod: DockerPod, port: int) -> Sample:
    main = pod.launches()[-1]
    started = time.perf_counter()
    name = await pod.start(main)
    try:
        await wait_ready(f"http://127.0.0.1:{port}/ready", lambda: pod.running(name))
        wall = time.perf_counter() - started
        cpu = container_cpu(name)
        await asyncio.sleep(IDLE)
        return wall, cpu, await asyncio.to_thread(container_rss, name)
    finally:
        await pod.remove()


def line(label: str, samples: list[Sample], baseline: list[Sample] | None) -> str:
    walls = [wall for wall, _, _ in samples]
    cpus = [cpu for _, cpu, _ in samples if cpu is not None]
    sizes = [rss for _, _, rss in samples if rss is not None]
    wall = statistics.median(walls)
    text = f"{label:<12} {wall:6.2f} s (min {min(walls):.2f}, max {max(walls):.2f})"
    if cpus:
        text += f"   CPU {statistics.median(cpus):5.2f} s"
    if sizes:
        text += f"   idle RSS {statistics.median(sizes):5.1f} MB"
    if baseline:
        base_wall = statistics.median(w for w, _, _ in baseline)
        text += f"   {wall / base_wall:4.1f}x wall"
        base_cpus = [c for _, c, _ in baseline if c is not None]
        if cpus and base_cpus:
            text += f", {statistics.median(cpus) / statistics.median(base_cpus):4.1f}x CPU"
    return text


async def measure(tag: str, admin_dsn: str, workdir: Path) -> None:
    resource = load_butler_file(ROOT / "roster" / "health.yaml")
    rendered = await render_butler_pod(resource, tag, admin_dsn, "bench_img_", free_port())
    pod = rendered.pod(workdir)
    started = time.perf_counter()
    await pod.run_init(pod.launches()[0])
    migrate = time.perf_counter() - started
    await pod.remove()
    cold = rendered.pod(workdir, {"PYTHONPYCACHEPREFIX": "/nonexistent"})
    results: dict[str, list[Sample]] = {"local": [], "container": [], "no bytecode": []}
    for _ in range(ROUNDS):  # interleaved, so load changes hit every variant alike
        results["local"].append(await local_start(rendered, workdir))
        results["container"].append(await container_start(pod, rendered.port))
        results["no bytecode"].append(await container_start(cold, rendered.port))
    print(
        f"butler start -> /ready 200, median of {ROUNDS} interleaved rounds (goal <= 3 s); "
        f"RSS after {IDLE:.0f} s idle (goal <= 90 MB)"
    )
    print(f"migrate container (init step, schema already provisioned): {migrate:.2f} s")
    print(line("local", results["local"], None))
    print(line("container", results["container"], results["local"]))
    print(line("no bytecode", results["no bytecode"], results["container"]) + " vs container")


async def main() -> None:
    try:
        ensure_engine()
    except EngineUnavailable as exc:
        print(f"bench_image_start: skipped, no Docker engine: {exc}")
        return
    bases = ensure_bases("auto", ROOT)
    built = build_image("butler", f"butlers-test/butler:{content_key('butler', bases)}", bases)
    print(f"butler image {built.tag}: {built.size_mb:.0f} MB")
    with scratch_dir("butlers-bench-image-") as root:
        server = EmbeddedPostgres(root / "postgres", fsync=False)
        server.start()
        try:
            await measure(built.tag, server.admin_dsn(), root)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
