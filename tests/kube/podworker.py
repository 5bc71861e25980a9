"""One pod on the process kubelet: volumes, init containers, containers, probes, status.

The worker runs a pod the way a kubelet does: it makes the pod's volumes, runs
each init container to completion (retrying with back-off), then starts every
container as a local process in its own mount namespace, runs its probes,
restarts it per `restartPolicy` (CrashLoopBackOff), and writes the pod's status
through the API after every change. On deletion it stops the containers
(SIGTERM, SIGKILL after the grace period) and removes the pod object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from butlers.db.embedded import free_port
from tests.e2e.harness.localrun import LaunchError

from .api import ApiError, KubeApi, build_path
from .environment import build_container_env, expand, referenced_objects
from .images import IMAGE_PATHS, ImageError, build_argv
from .mounts import Mount, MountError, build_container_argv, build_hosts_file, build_mount_script
from .podstatus import ContainerState, build_pod_status, now_rfc3339
from .probes import ProbeSpec, ProbeWorker
from .processes import die_with_parent
from .volumes import PodVolumes, VolumeError

if TYPE_CHECKING:
    from .kubelet import ProcessKubelet

log = logging.getLogger("butlers.tests.kubelet")
MAX_BACKOFF = 300.0
TOKEN_CHECK_SECONDS = 30.0


class ConfigError(RuntimeError):
    """The container cannot be configured yet (CreateContainerConfigError): retried."""


@dataclass
class Container:
    spec: dict[str, Any]
    state: ContainerState
    ports: dict[int | str, int] = field(default_factory=dict)
    process: asyncio.subprocess.Process | None = None
    probes: dict[str, ProbeWorker] = field(default_factory=dict)
    killed_reason: str = ""

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def pid(self) -> int | None:
        if self.process is not None and self.process.returncode is None:
            return self.process.pid
        return None

    def resolve_port(self, port: int | str) -> int:
        if port in self.ports:
            return self.ports[port]
        raise LookupError(f"container {self.name} declares no port {port!r}")


def _backoff(base: float, failures: int) -> float:
    return float(min(base * (2 ** max(failures - 1, 0)), MAX_BACKOFF))


class PodWorker:
    """Runs one pod until it is deleted (or completes, for restartPolicy Never/OnFailure)."""

    def __init__(self, kubelet: ProcessKubelet, pod: dict[str, Any]) -> None:
        self.kubelet = kubelet
        self.pod = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.name: str = meta["name"]
        self.namespace: str = meta["namespace"]
        self.root: Path = kubelet.root / "pods" / self.uid
        self.api: KubeApi = kubelet.api
        spec = pod["spec"]
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        self.init = [
            Container(c, ContainerState(c["name"], c.get("image", ""), init=True))
            for c in spec.get("initContainers") or []
        ]
        self.containers = [
            Container(c, ContainerState(c["name"], c.get("image", ""))) for c in spec["containers"]
        ]
        for c in self.init:
            c.state.wait("PodInitializing")
        self.pod_ip = ""
        self.sandbox_ready = False
        self.start_time = now_rfc3339()
        self.volumes = PodVolumes(self.api, pod, self.root / "volumes")
        self.terminating = asyncio.Event()
        self._dirty = asyncio.Event()
        self._status: dict[str, Any] = dict(pod.get("status") or {})
        self._tasks: list[asyncio.Task[Any]] = []
        self.done = asyncio.Event()
        # Containers crashed on purpose and kept down until released (fault injection).
        self.held: dict[str, asyncio.Event] = {}

    # --- bookkeeping ----------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"

    def local_port(self, container_port: int) -> int | None:
        for c in self.containers:
            if container_port in c.ports:
                return c.ports[container_port]
        return None

    def mark_dirty(self) -> None:
        self._dirty.set()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._status_loop(), name=f"status-{self.label}"),
            loop.create_task(self._run(), name=f"pod-{self.label}"),
        ]

    async def _status_loop(self) -> None:
        """Writes the pod's status whenever it changed (changes in flight coalesce)."""
        path = build_path("v1", "pods", self.namespace, self.name, "status")
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            status = build_pod_status(
                previous=self._status,
                init=[c.state for c in self.init],
                containers=[c.state for c in self.containers],
                restart_policy=self.restart_policy,
                sandbox_ready=self.sandbox_ready,
                host_ip=self.kubelet.host_ip,
                pod_ip=self.pod_ip,
                start_time=self.start_time,
            )
            try:
                written = await self.api.patch(path, {"status": status})
                self._status = written.get("status") or status
            except ApiError as exc:
                if exc.status == 404:
                    return  # the pod is gone
                log.warning("pod %s: status update failed: %s", self.label, exc)
                await asyncio.sleep(1.0)
                self._dirty.set()

    async def event(self, reason: str, message: str, kind: str = "Normal") -> None:
        await self.kubelet.event(self.pod, reason, message, kind)

    # --- setup -----------------------------------------------------------------------

    async def _read_objects(
        self, container: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        secret_names, map_names = referenced_objects(container)
        secrets: dict[str, Any] = {}
        maps: dict[str, Any] = {}
        for names, plural, into in (
            (secret_names, "secrets", secrets),
            (map_names, "configmaps", maps),
        ):
            for name in names:
                try:
                    into[name] = await self.api.get(build_path("v1", plural, self.namespace, name))
                except ApiError as exc:
                    if exc.status != 404:
                        raise ConfigError(f"{plural[:-1]} {name}: {exc.message}") from None
        return secrets, maps

    async def _environment(self, c: Container) -> dict[str, str]:
        kubelet = self.kubelet
        profile = kubelet.images.find(c.spec.get("image", ""))
        secrets, maps = await self._read_objects(c.spec)
        await kubelet.proxy.sync_namespace(self.namespace)
        try:
            declared = build_container_env(c.spec, self.pod, secrets, maps, kubelet.lookup_service)
        except (LaunchError, VolumeError) as exc:
            raise ConfigError(str(exc)) from None
        env: dict[str, str] = dict(profile.env)
        if self.pod["spec"].get("enableServiceLinks", True):
            env |= await kubelet.service_env(self.namespace)
        env |= kubelet.api_env()
        env |= declared
        env |= profile.listen_env(c.ports)
        env["HOSTNAME"] = self.name
        return env

    def _mounts(self, c: Container) -> list[Mount]:
        mounts = []
        for mount in c.spec.get("volumeMounts") or []:
            source = self.volumes.dirs.get(mount["name"])
            if source is None:
                raise ConfigError(f"volumeMount {mount['name']!r} names no volume of the pod")
            if mount.get("subPath"):
                source = source / mount["subPath"]
            target = os.path.realpath(mount["mountPath"])
            mounts.append(Mount(str(source), target, bool(mount.get("readOnly")), source.is_file()))
        # The harness's own host directories (e.g. span files) stay visible and writable.
        mounts += [Mount(path, os.path.realpath(path)) for path in self.kubelet.writable_paths]
        return mounts

    def _allocate_ports(self, c: Container) -> None:
        if c.ports:
            return
        for port in c.spec.get("ports") or []:
            local = free_port()
            c.ports[int(port["containerPort"])] = local
            if port.get("name"):
                c.ports[port["name"]] = local

    async def _launch(self, c: Container) -> asyncio.subprocess.Process:
        """Start the container's process (ConfigError/ImageError when it cannot be)."""
        profile = self.kubelet.images.find(c.spec.get("image", ""))
        self._allocate_ports(c)
        env = await self._environment(c)
        argv = [expand(arg, env) for arg in build_argv(c.spec, profile)]
        if not argv:
            raise ConfigError("no command: neither the container nor its image names one")
        security = c.spec.get("securityContext") or {}
        hosts = self.root / "hosts"
        hosts.write_text(build_hosts_file(self.pod_ip, self.name, self.kubelet.api_address))
        try:
            script = build_mount_script(
                self._mounts(c),
                hosts_file=str(hosts),
                pod_root=str(self.root),
                overlay_dir=str(self.root / "overlay" / c.name),
                workdir=c.spec.get("workingDir") or profile.workdir,
                read_only_root=bool(security.get("readOnlyRootFilesystem")),
                keep=IMAGE_PATHS,
            )
        except MountError as exc:
            raise ConfigError(str(exc)) from None
        log_path = self.kubelet.log_path(self.pod, c.name)
        with log_path.open("ab") as out:
            return await asyncio.create_subprocess_exec(
                *build_container_argv(script, argv),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    async def _start(self, c: Container) -> bool:
        """Launch; on a configuration problem report it (waiting) and return False."""
        try:
            c.process = await self._launch(c)
        except ImageError as exc:
            c.state.wait("ErrImagePull", str(exc))
        except ConfigError as exc:
            c.state.wait("CreateContainerConfigError", str(exc))
        else:
            c.state.run(c.process.pid)
            self.mark_dirty()
            await self.event("Started", f"Started container {c.name}")
            return True
        self.mark_dirty()
        await self.event(
            "Failed", f"Error: {c.state.state['waiting'].get('message', '')}", "Warning"
        )
        return False

    # --- running ---------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._prepare()
            if not await self._run_init():
                return
            await asyncio.gather(*(self._supervise(c) for c in self.containers))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pod %s: worker failed", self.label)
            raise
        finally:
            self.done.set()

    async def _prepare(self) -> None:
        """The sandbox: an IP, the volumes (retried until they can be made)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.pod_ip = self.kubelet.allocate_ip(self.uid)
        failures = 0
        while not self.terminating.is_set():
            try:
                await self.volumes.prepare()
                break
            except VolumeError as exc:
                failures += 1
                # The pod stays ContainerCreating; the reason is in a FailedMount event.
                await self.event("FailedMount", f"MountVolume.SetUp failed: {exc}", "Warning")
                await self._wait_or_terminate(_backoff(1.0, failures))
        self.sandbox_ready = True
        for c in self.containers:
            c.state.wait("PodInitializing" if self.init else "ContainerCreating")
        self.mark_dirty()
        if self.volumes.tokens:
            self._tasks.append(asyncio.get_running_loop().create_task(self._renew_tokens()))

    async def _renew_tokens(self) -> None:
        while not self.terminating.is_set():
            await self._wait_or_terminate(TOKEN_CHECK_SECONDS)
            try:
                await self.volumes.renew_tokens()
            except VolumeError as exc:
                log.warning("pod %s: %s", self.label, exc)

    async def _wait_or_terminate(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.terminating.wait(), seconds)

    async def _run_init(self) -> bool:
        """Every init container to exit 0, in order. False: the pod will not start."""
        for c in self.init:
            failures = 0
            while True:
                if self.terminating.is_set():
                    return False
                if await self._start(c):
                    code = await self._wait_exit(c)
                    if code == 0:
                        break
                    message = f"init container {c.name} exited with {code}"
                    if self.restart_policy == "Never":
                        self.mark_dirty()
                        return False
                else:
                    message = c.state.state["waiting"].get("message", "")
                failures += 1
                delay = _backoff(self.kubelet.restart_backoff, failures)
                if c.state.terminated:
                    c.state.restarting(
                        "CrashLoopBackOff", f"back-off {delay:g}s restarting failed {message}"
                    )
                self.mark_dirty()
                await self._wait_or_terminate(delay)
        return True

    async def _wait_exit(self, c: Container) -> int:
        assert c.process is not None
        code = await c.process.wait()
        # Whatever the container started in its group goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.process.pid, signal.SIGKILL)
        signal_name = ""
        if code < 0:
            signal_name = signal.Signals(-code).name
            code = 128 - code
        reason = c.killed_reason or ("Completed" if code == 0 else "Error")
        c.state.terminate(code, reason, f"killed by {signal_name}" if signal_name else "")
        c.killed_reason = ""
        self.mark_dirty()
        return code

    def _probe_workers(self, c: Container) -> None:
        for kind in ("startup", "readiness", "liveness"):
            spec = c.spec.get(f"{kind}Probe")
            if spec:
                c.probes[kind] = ProbeWorker(
                    kind=kind,
                    spec=ProbeSpec.parse(spec),
                    resolve=c.resolve_port,
                    pid=lambda c=c: c.pid,
                    on_change=lambda c=c: self._probe_changed(c),
                )
        if "startup" in c.probes:
            c.probes["startup"].start()
        else:
            self._start_probes_after_startup(c)

    def _start_probes_after_startup(self, c: Container) -> None:
        for kind in ("readiness", "liveness"):
            if kind in c.probes:
                c.probes[kind].start()
        if "readiness" not in c.probes:
            c.state.ready = True
            self.mark_dirty()

    def _probe_changed(self, c: Container) -> None:
        startup = c.probes.get("startup")
        if (
            startup is not None
            and startup.success
            and c.state.running
            and not c.probes.get("_started")
        ):
            c.probes["_started"] = startup  # marker: later probes started
            self._start_probes_after_startup(c)
        readiness = c.probes.get("readiness")
        if readiness is not None:
            c.state.ready = readiness.success and c.state.running
        for kind in ("startup", "liveness"):
            probe = c.probes.get(kind)
            if probe is not None and probe.failed and c.pid is not None:
                asyncio.get_running_loop().create_task(
                    self._restart_unhealthy(c, kind, probe.message)
                )
        self.mark_dirty()

    async def _restart_unhealthy(self, c: Container, kind: str, message: str) -> None:
        await self.event("Unhealthy", f"{kind.capitalize()} probe failed: {message}", "Warning")
        await self.event("Killing", f"Container {c.name} failed {kind} probe, will be restarted")
        c.killed_reason = "Error"
        await self._stop_container(c, self._grace())

    async def _stop_probes(self, c: Container) -> None:
        probes = {id(p): p for p in c.probes.values()}
        c.probes.clear()
        await asyncio.gather(*(p.stop() for p in probes.values()))

    async def _supervise(self, c: Container) -> None:
        """Run, restart per policy, until the pod terminates or the container is done."""
        failures = 0
        while not self.terminating.is_set():
            started_at = time.monotonic()
            if await self._start(c):
                self._probe_workers(c)
                code = await self._wait_exit(c)
                await self._stop_probes(c)
                if self.terminating.is_set():
                    return
                if c.name in self.held:
                    await self._wait_released(c)
                    if self.terminating.is_set():
                        return
                    c.state.restarting("Released", f"restarted after a held crash (exit {code})")
                    failures = 0
                    continue
                if self.restart_policy == "Never" or (
                    self.restart_policy == "OnFailure" and code == 0
                ):
                    return
                # A container that ran for 10 minutes starts its back-off afresh.
                failures = 1 if time.monotonic() - started_at > 600 else failures + 1
                message = f"exited with {code}"
            else:
                failures += 1
                message = c.state.state["waiting"].get("message", "")
            delay = _backoff(self.kubelet.restart_backoff, failures)
            if c.state.terminated:
                c.state.restarting(
                    "CrashLoopBackOff",
                    f"back-off {delay:g}s restarting failed container={c.name} "
                    f"pod={self.name}: {message}",
                )
                await self.event(
                    "BackOff", f"Back-off restarting failed container {c.name}", "Warning"
                )
            self.mark_dirty()
            await self._wait_or_terminate(delay)

    async def _wait_released(self, c: Container) -> None:
        released = self.held[c.name]
        terminating = asyncio.ensure_future(self.terminating.wait())
        try:
            await asyncio.wait(
                [asyncio.ensure_future(released.wait()), terminating],
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            terminating.cancel()
        self.held.pop(c.name, None)

    async def crash(self, container: str, hold: bool) -> None:
        """SIGKILL the container's processes, as a crash; with `hold` it stays down
        (terminated, not ready) until `release`."""
        c = next(c for c in self.containers if c.name == container)
        if hold:
            self.held[container] = asyncio.Event()
        if c.process is not None and c.process.returncode is None:
            c.killed_reason = "Error"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.process.pid, signal.SIGKILL)
            await c.process.wait()

    def release(self, container: str) -> None:
        if container in self.held:
            self.held[container].set()

    # --- stopping --------------------------------------------------------------------

    def _grace(self) -> float:
        meta_grace = self.pod["metadata"].get("deletionGracePeriodSeconds")
        spec_grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        return float(meta_grace if meta_grace is not None else spec_grace)

    async def _stop_container(self, c: Container, grace: float) -> None:
        process = c.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), max(grace, 0.1))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()

    async def terminate(self, grace: float | None = None, delete: bool = True) -> None:
        """Stop every container (SIGTERM, SIGKILL after the grace period); then, with
        `delete`, remove the pod object as a kubelet does once its containers are gone."""
        if not self.terminating.is_set():
            self.terminating.set()
            if delete:
                await self.event("Killing", "Stopping pod")
        grace = self._grace() if grace is None else grace
        for c in [*self.init, *self.containers]:
            c.killed_reason = c.killed_reason or "Error"
        await asyncio.gather(
            *(self._stop_container(c, grace) for c in [*self.init, *self.containers])
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), 10)
        if delete:
            await self.mark_final_and_delete()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def mark_final_and_delete(self) -> None:
        self.mark_dirty()
        await asyncio.sleep(0)
        path = build_path("v1", "pods", self.namespace, self.name)
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        try:
            await self.api.delete(path, body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("pod %s: final delete failed: %s", self.label, exc)

    def update(self, pod: Mapping[str, Any]) -> None:
        """A newer version of the pod object (metadata changes, deletion timestamp)."""
        self.pod = dict(pod)
        self.volumes.pod = self.pod


PodCallback = Callable[[PodWorker], None]
