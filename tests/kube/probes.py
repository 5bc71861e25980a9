"""Readiness, liveness and startup probes, run the way a kubelet runs them.

A `ProbeWorker` runs one probe of one container on its own schedule
(initialDelaySeconds, periodSeconds, timeoutSeconds, success and failure
thresholds) and keeps the result: the kubelet reads `ready`/`failed` from it.
httpGet and tcpSocket go to the local port the container's port was remapped
to; exec runs the command inside the container's mount namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx

Resolve = Callable[[int | str], int]  # container port (number or name) → local port


@dataclass(frozen=True)
class ProbeSpec:
    action: Mapping[str, Any]
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def parse(cls, probe: Mapping[str, Any]) -> ProbeSpec:
        actions = {k: v for k, v in probe.items() if k in {"httpGet", "tcpSocket", "exec", "grpc"}}
        return cls(
            action=actions,
            initial_delay=float(probe.get("initialDelaySeconds", 0)),
            period=float(probe.get("periodSeconds", 10)),
            timeout=float(probe.get("timeoutSeconds", 1)),
            success_threshold=int(probe.get("successThreshold", 1)),
            failure_threshold=int(probe.get("failureThreshold", 3)),
        )


async def run_probe(spec: ProbeSpec, resolve: Resolve, pid: int | None) -> tuple[bool, str]:
    """One probe attempt: (success, why not)."""
    action = spec.action
    try:
        if "httpGet" in action:
            get = action["httpGet"]
            scheme = str(get.get("scheme", "HTTP")).lower()
            port = resolve(get["port"])
            headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
            async with httpx.AsyncClient(verify=False, timeout=spec.timeout) as client:
                response = await client.get(
                    f"{scheme}://127.0.0.1:{port}{get.get('path', '/')}", headers=headers
                )
            ok = 200 <= response.status_code < 400
            return ok, f"HTTP probe failed with statuscode: {response.status_code}"
        if "tcpSocket" in action:
            port = resolve(action["tcpSocket"]["port"])
            _, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port), spec.timeout
            )
            writer.close()
            return True, ""
        if "exec" in action:
            if pid is None:
                return False, "container not running"
            command = list(action["exec"]["command"])
            process = await asyncio.create_subprocess_exec(
                "nsenter",
                f"--mount=/proc/{pid}/ns/mnt",
                "--",
                *command,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            try:
                out, _ = await asyncio.wait_for(process.communicate(), spec.timeout)
            except TimeoutError:
                process.kill()
                await process.wait()
                return False, f"command timed out after {spec.timeout:g}s"
            return process.returncode == 0, out.decode(errors="replace")[-200:]
        return False, f"probe handler {sorted(action)} is not supported by the process kubelet"
    except (httpx.HTTPError, OSError, TimeoutError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


@dataclass
class ProbeWorker:
    """One probe of one container; `on_change` is called when its result flips."""

    kind: str  # readiness | liveness | startup
    spec: ProbeSpec
    resolve: Resolve
    pid: Callable[[], int | None]
    on_change: Callable[[], None]
    # readiness starts failed, liveness and startup start "not failed".
    success: bool = field(init=False)
    failed: bool = False
    message: str = ""
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.success = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"probe-{self.kind}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        await asyncio.sleep(self.spec.initial_delay)
        successes = failures = 0
        while True:
            ok, why = await run_probe(self.spec, self.resolve, self.pid())
            if ok:
                successes, failures = successes + 1, 0
            else:
                successes, failures = 0, failures + 1
                self.message = why
            before = (self.success, self.failed)
            if successes >= self.spec.success_threshold:
                self.success, self.failed = True, False
            elif failures >= self.spec.failure_threshold:
                self.success, self.failed = False, True
            if (self.success, self.failed) != before:
                self.on_change()
            if self.kind == "startup" and self.success:
                return  # a startup probe stops once it succeeded
            await asyncio.sleep(self.spec.period)
