"""Controlling a running ecosystem from another process: pid file, detach, down, status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx

from butlers.ecosystem.state import EcosystemState, read_state, state_path
from butlers.errors import EcosystemError
from butlers.settings import EcosystemSettings
from butlers.waiting import process_alive, wait_until_blocking

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
        return pid if process_alive(pid) else None

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def ensure_not_running(data_dir: Path) -> None:
    pid = PidFile(data_dir).read()
    if pid is not None:
        raise EcosystemError(
            f"an ecosystem is already running in {data_dir} (pid {pid}); "
            f"`butlers restart --data-dir {data_dir}` starts it again with the current "
            f"settings, `butlers down --data-dir {data_dir}` stops it"
        )


def start_detached(settings: EcosystemSettings, program: str) -> EcosystemState:
    """Start `butlers up` in the background; return its state once every butler is ready."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "logs").mkdir(mode=0o700, exist_ok=True)
    log_path = settings.data_dir / "logs" / "supervisor.log"
    state_path(settings.data_dir).unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "butlers", "up",
        "--data-dir", str(settings.data_dir), "--roster", str(settings.roster_dir),
        *(["--dashboard-port", str(settings.dashboard_port)] if settings.dashboard
          else ["--no-dashboard"]),
    ]  # fmt: skip
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    start = os.fstat(fd).st_size  # what earlier runs wrote is not this run's output
    with os.fdopen(fd, "ab") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "BUTLERS_LOG_FILE": str(log_path)},  # rotated by the supervisor
        )

    def started() -> EcosystemState | None:
        if process.poll() is not None:
            raise EcosystemError(_failure(log_path, start, process.returncode))
        state = read_state(settings.data_dir)
        if state is None or state.supervisor_pid != process.pid or not state.ready:
            return None
        return state

    return wait_until_blocking(
        started,
        timeout=DETACH_TIMEOUT,
        message=f"not ready after {DETACH_TIMEOUT:.0f} s; see {log_path}",
        error=EcosystemError,
    )


def _failure(log_path: Path, start: int, code: int) -> str:
    """Why the detached `butlers up` exited, from what this run wrote (not an earlier
    run's log): its error line alone when it printed one, else its last lines."""
    with log_path.open("rb") as log:
        log.seek(start)
        lines = log.read().decode(errors="replace").splitlines()
    error = next((line for line in reversed(lines) if line.startswith("butlers up: ")), None)
    if error is not None:
        reason = error.removeprefix("butlers up: ")
        return f"{reason}\n(the detached `butlers up` exited with code {code}; log: {log_path})"
    tail = "\n".join(lines[-20:]) or "(it wrote nothing)"
    return f"`butlers up` exited with code {code}:\n{tail}"


def stop_running(data_dir: Path, timeout: float = DOWN_TIMEOUT) -> bool:
    """SIGTERM the supervisor and wait until it has stopped everything."""
    pid_file = PidFile(data_dir)
    pid = pid_file.read()
    if pid is None:
        pid_file.remove()
        return False
    os.kill(pid, signal.SIGTERM)
    wait_until_blocking(
        lambda: not process_alive(pid),
        timeout=timeout,
        message=f"the supervisor (pid {pid}) did not stop within {timeout:.0f} s",
        error=EcosystemError,
    )
    return True


# The dashboard's entry in `probe_status`'s statuses (no butler name starts with NUL).
DASHBOARD = "\0dashboard"


def probe_status(data_dir: Path) -> tuple[EcosystemState, dict[str, str]] | None:
    """The state of a running ecosystem and the live status (ready, not ready, down) of
    each butler and of the dashboard (key `DASHBOARD`); None when nothing runs in
    `data_dir`."""
    if PidFile(data_dir).read() is None:
        return None
    state = read_state(data_dir)
    if state is None:
        return None
    statuses: dict[str, str] = {}
    with httpx.Client(timeout=2.0) as client:
        for name, butler in state.butlers.items():
            try:
                response = client.get(f"{butler.base_url}/ready")
                statuses[name] = "ready" if response.status_code == 200 else "not ready"
            except httpx.HTTPError:
                statuses[name] = "down"
        dashboard = state.dashboard
        if dashboard is not None and dashboard.url:
            try:
                response = client.get(f"{dashboard.url}api/health")
                statuses[DASHBOARD] = "ready" if response.status_code == 200 else "not ready"
            except httpx.HTTPError:
                statuses[DASHBOARD] = "down"
    return state, statuses
