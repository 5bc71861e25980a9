"""Child processes of a test cluster: started in their own process group, killed with it.

Every process gets a parent-death signal, so a test run that crashes takes its
control plane and pods with it instead of leaving them bound to ports.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the thread that started it goes away."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after `grace` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    # Children that outlived the leader (or ignored SIGTERM) go too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)


@dataclass
class Supervisor:
    """Owner of a set of named long-running processes, each logging to its own file."""

    log_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path(name).open("ab") as log:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.processes[name] = process
        return process

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def check_running(self) -> None:
        """Raise, with the log's tail, if any process has exited."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {process.returncode}:\n{tail(self.log_path(name))}"
                )

    def stop(self, name: str, grace: float = 10.0) -> None:
        process = self.processes.pop(name, None)
        if process is not None:
            stop_group(process, grace)

    def stop_all(self, order: Sequence[str] = (), grace: float = 10.0) -> None:
        """Stop `order` first (in that order), then the rest; every process is gone after."""
        deadline = time.monotonic() + grace
        for name in [*order, *(n for n in list(self.processes) if n not in order)]:
            self.stop(name, max(0.5, deadline - time.monotonic()))
