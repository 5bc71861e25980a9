"""Controlling a running ecosystem from another process: pid file, detach, down, status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from butlers.ecosystem.supervisor import read_state_file
from butlers.errors import EcosystemError
from butlers.settings import EcosystemSettings

DETACH_TIMEOUT = 120.0
DOWN_TIMEOUT = 60.0


class PidFile:
    """`<data-dir>/butlers.pid`: the pid of the supervising `butlers up`."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "butlers.pid"

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(str(os.getpid()))

    def read(self) -> int | None:
        try:
            pid = int(self.path.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def ensure_not_running(data_dir: Path) -> None:
    pid = PidFile(data_dir).read()
    if pid is not None:
        raise EcosystemError(
            f"an ecosystem is already running in {data_dir} (pid {pid}); "
            f"run `butlers down --data-dir {data_dir}` first"
        )


def start_detached(settings: EcosystemSettings, program: str) -> dict[str, Any]:
    """Start `butlers up` in the background; return its state once every butler is ready."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "logs").mkdir(exist_ok=True)
    log_path = settings.data_dir / "logs" / "supervisor.log"
    (settings.data_dir / "ecosystem.json").unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "butlers", "up",
        "--data-dir", str(settings.data_dir), "--roster", str(settings.roster_dir),
        *(["--dashboard-port", str(settings.dashboard_port)] if settings.dashboard
          else ["--no-dashboard"]),
    ]  # fmt: skip
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + DETACH_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise EcosystemError(f"`butlers up` exited with code {process.returncode}:\n{tail}")
        state = read_state_file(settings.data_dir)
        if state is not None and state.get("supervisor_pid") == process.pid:
            return state
        time.sleep(0.05)
    raise EcosystemError(f"not ready after {DETACH_TIMEOUT:.0f} s; see {log_path}")


def stop_running(data_dir: Path, timeout: float = DOWN_TIMEOUT) -> bool:
    """SIGTERM the supervisor and wait until it has stopped everything."""
    pid_file = PidFile(data_dir)
    pid = pid_file.read()
    if pid is None:
        pid_file.remove()
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            raise EcosystemError(f"the supervisor (pid {pid}) did not stop within {timeout:.0f} s")
        time.sleep(0.05)
    return True


def probe_status(data_dir: Path) -> dict[str, Any] | None:
    """The state file of a running ecosystem, each butler with a live `status`."""
    if PidFile(data_dir).read() is None:
        return None
    state = read_state_file(data_dir)
    if state is None:
        return None
    with httpx.Client(timeout=2.0) as client:
        for butler in state["butlers"].values():
            base = butler["url"].removesuffix("/mcp")
            try:
                response = client.get(f"{base}/ready")
                butler["status"] = "ready" if response.status_code == 200 else "not ready"
            except httpx.HTTPError:
                butler["status"] = "down"
        dashboard = state.get("dashboard") or {}
        if dashboard.get("url"):
            try:
                response = client.get(f"{dashboard['url']}api/health")
                dashboard["status"] = "ready" if response.status_code == 200 else "not ready"
            except httpx.HTTPError:
                dashboard["status"] = "down"
    return state
