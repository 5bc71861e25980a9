"""Rendered pods as local processes: what a kubelet would run, on this machine.

Each Deployment becomes a `LocalPod`: its init containers run to completion,
then its main container runs as a subprocess, with the environment and files
`localrun` resolves from the pod spec. Two things differ from a
cluster, on purpose: the container listens on 127.0.0.1 and a free port (each
Service is mapped to that port), and it exits when this process does.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx

from butlers.db.embedded import free_port
from butlers.waiting import wait_until

from .localrun import ContainerLaunch, Objects, build_pod_launches

READY_TIMEOUT = 60.0
INIT_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
# The only variables of this process a container gets: enough to find and run Python
# (and the same code: a PYTHONPATH the tests run with).
HOST_ENV = ("HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")


SERVICE_URL = re.compile(r"://([A-Za-z0-9.-]+:\d+)(?=/|$)")


class PodError(RuntimeError):
    """A pod did not start: an init container failed or the container never got ready."""


def build_host_env(port: int) -> dict[str, str]:
    """What the local machine adds to a container's environment."""
    bin_dir = str(Path(sys.executable).parent)
    env = {key: os.environ[key] for key in HOST_ENV if key in os.environ}
    env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    # Listen where the Service mapping points (the butler image runs a butler or the
    # dashboard), and exit with this test process.
    env["BUTLERS_HOST"] = "127.0.0.1"
    env["BUTLERS_PORT"] = str(port)
    env["BUTLERS_DASHBOARD_HOST"] = "127.0.0.1"
    env["BUTLERS_DASHBOARD_PORT"] = str(port)
    env["BUTLERS_PARENT_PID"] = str(os.getpid())
    return env


def build_service_hosts(service: Mapping[str, Any], local_port: int) -> dict[str, str]:
    """Every `host:port` a pod may use for the Service → the local address serving it."""
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    hosts = {}
    for port in service["spec"].get("ports") or []:
        for host in (name, f"{name}.{namespace}", f"{name}.{namespace}.svc"):
            for alias in (host, f"{host}.cluster.local") if host.endswith(".svc") else (host,):
                hosts[f"{alias}:{port['port']}"] = f"127.0.0.1:{local_port}"
    return hosts


def resolve_service_urls(value: str, hosts: Mapping[str, str]) -> str:
    """The value with each URL to a Service rewritten to the local address serving it."""
    return SERVICE_URL.sub(lambda m: "://" + hosts.get(m.group(1), m.group(1)), value)


def readiness_path(deployment: Mapping[str, Any], container: str) -> str:
    """The container's HTTP readiness probe path (`/` when it has none)."""
    for spec in deployment["spec"]["template"]["spec"]["containers"]:
        if spec["name"] == container:
            probe = (spec.get("readinessProbe") or {}).get("httpGet") or {}
            return str(probe.get("path", "/"))
    return "/"


def selects(service: Mapping[str, Any], deployment: Mapping[str, Any]) -> bool:
    """Does the Service's selector match the Deployment's pod labels?"""
    selector = service["spec"].get("selector") or {}
    labels = deployment["spec"]["template"]["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@dataclass
class LocalPod:
    """One Deployment's pod: init containers, then its main container as a process."""

    name: str
    init: list[ContainerLaunch]
    main: ContainerLaunch
    root: Path
    log_path: Path
    port: int
    ready_path: str
    # Service `host:port` → local address (the cluster DNS this machine stands in for).
    hosts: Mapping[str, str] = field(default_factory=dict)
    process: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The main container's process, while it runs."""
        process = self.process
        return process.pid if process is not None and process.returncode is None else None

    def _materialize(self, launch: ContainerLaunch) -> ContainerLaunch:
        """Write the mounted files under this pod's root; return the relocated launch."""
        local = launch.relocate(str(self.root))
        for path, content in local.files.items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content)
        return local

    async def _exec(self, launch: ContainerLaunch) -> asyncio.subprocess.Process:
        local = self._materialize(launch)
        env = {k: resolve_service_urls(v, self.hosts) for k, v in local.env.items()}
        env |= build_host_env(self.port)
        executable = shutil.which(local.argv[0], path=env["PATH"])
        if executable is None:
            raise PodError(f"pod {self.name}: container {launch.name!r}: {local.argv[0]} not found")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            return await asyncio.create_subprocess_exec(
                executable,
                *local.argv[1:],
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )

    async def run_init(self) -> None:
        """Every init container, in order, each to a zero exit code."""
        for launch in self.init:
            process = await self._exec(launch)
            try:
                code = await asyncio.wait_for(process.wait(), INIT_TIMEOUT)
            except TimeoutError:
                process.kill()
                await process.wait()
                raise PodError(
                    f"pod {self.name}: init container {launch.name!r} still running after "
                    f"{INIT_TIMEOUT:.0f} s; see {self.log_path}"
                ) from None
            if code != 0:
                raise PodError(
                    f"pod {self.name}: init container {launch.name!r} exited with {code}:\n"
                    f"{_tail(self.log_path)}"
                )

    async def start(self) -> None:
        """Start the main container (init containers must have run) and wait until ready."""
        self.process = await self._exec(self.main)
        await self.wait_ready()

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        async with httpx.AsyncClient(timeout=2.0) as client:

            async def ready() -> bool:
                if self.process is not None and self.process.returncode is not None:
                    raise PodError(
                        f"pod {self.name}: container exited with {self.process.returncode} "
                        f"while starting:\n{_tail(self.log_path)}"
                    )
                try:
                    response = await client.get(self.base_url + self.ready_path)
                except httpx.HTTPError:
                    return False
                return response.status_code == 200

            await wait_until(
                ready,
                timeout=timeout,
                message=f"pod {self.name}: not ready after {timeout:.0f} s; see {self.log_path}",
                error=PodError,
            )

    async def kill(self) -> None:
        """SIGKILL the container, as a crash would."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM (in-flight calls finish), SIGKILL after STOP_TIMEOUT."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def restart(self) -> None:
        """A container restart: the same pod spec, port and files; init containers not rerun."""
        await self.stop()
        await self.start()


@dataclass
class LocalPods:
    """Owner of every local pod of an ecosystem: starts them, stops them all at the end."""

    root: Path
    pods: dict[str, LocalPod] = field(default_factory=dict)  # by Deployment name
    by_service: dict[str, LocalPod] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)  # shared by every pod

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def add(
        self, deployment: Mapping[str, Any], secrets: Objects, config_maps: Objects
    ) -> LocalPod:
        """A pod for the Deployment, on a free port; its last container is the main one."""
        name = deployment["metadata"]["name"]
        *init, main = build_pod_launches(deployment, secrets, config_maps)
        pod = LocalPod(
            name=name,
            init=init,
            main=main,
            root=self.root / "pods" / name,
            log_path=self.log_dir / f"{name}.log",
            port=free_port(),
            ready_path=readiness_path(deployment, main.name),
            hosts=self.hosts,
        )
        self.pods[name] = pod
        return pod

    def expose(self, service: Mapping[str, Any], deployments: list[Mapping[str, Any]]) -> LocalPod:
        """Route the Service to the pod of the Deployment it selects; returns that pod."""
        name = service["metadata"]["name"]
        deployment = next((d for d in deployments if selects(service, d)), None)
        if deployment is None:
            raise PodError(f"Service {name} selects no rendered Deployment")
        pod = self.by_service[name] = self.pods[deployment["metadata"]["name"]]
        self.hosts.update(build_service_hosts(service, pod.port))
        return pod

    async def start_all(self) -> None:
        """Like a kubelet: each pod's init containers, then its container; all in parallel."""

        async def boot(pod: LocalPod) -> None:
            await pod.run_init()
            await pod.start()

        results = await asyncio.gather(
            *(boot(pod) for pod in self.pods.values()), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def stop_all(self) -> None:
        await asyncio.gather(*(pod.stop() for pod in self.pods.values()))


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
