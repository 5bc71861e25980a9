"""The kind lane's own Docker engine: started for a run, stopped at its end.

kind runs its nodes privileged, which fails on machines whose capability bounding
set lacks CAP_SYS_RESOURCE; this engine's default runtime is `hack/kind/runc-wrapper`,
which takes that capability out of each container's spec. It has its own socket,
exec-root and data-root (the data-root under ~/.cache/butlers/kind/docker keeps the
node image between runs), no default bridge and no iptables rules of its own: kind's
network is a bridge this engine creates, and the host reaches the node (and published
ports) through it and the userland proxy. Other engines on the machine are left alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import pins

RUN = Path("/run/butlers-kind")
SOCKET = RUN / "docker.sock"
HOST = f"unix://{SOCKET}"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class EngineError(RuntimeError):
    """The lane's engine cannot run here; the message says why."""


def env() -> dict[str, str]:
    """The environment for docker and kind commands on this engine."""
    return {**os.environ, "DOCKER_HOST": HOST}


def docker(*args: str, timeout: float = 120.0, check: bool = True) -> str:
    try:
        done = subprocess.run(
            ["docker", *args],
            env=env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise EngineError(f"docker {' '.join(args)}: still running after {timeout:.0f} s") from None
    if check and done.returncode:
        raise EngineError(f"docker {' '.join(args)} failed: {done.stderr.strip()[-1500:]}")
    return done.stdout


def answers() -> bool:
    if not SOCKET.exists():
        return False
    try:
        return bool(docker("info", "--format", "{{.ServerVersion}}", timeout=20).strip())
    except EngineError:
        return False


def wrapper() -> Path:
    """The runc wrapper, copied into the cache (a clone may move; the engine keeps a path)."""
    source = pins.HACK / "runc-wrapper"
    data = source.read_bytes()
    target = pins.cache_root() / f"runc-wrapper-{hashlib.sha256(data).hexdigest()[:12]}"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_suffix(".tmp")
        staging.write_bytes(data)
        staging.chmod(0o755)
        staging.rename(target)
    return target


def build_dockerd(runtime: Path) -> list[str]:
    data_root = pins.cache_root() / "docker"
    return [
        "dockerd",
        f"--host={HOST}",
        f"--exec-root={RUN / 'exec'}",
        f"--data-root={data_root}",
        f"--pidfile={RUN / 'dockerd.pid'}",
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
        f"--add-runtime=butlers-kind-runc={runtime}",
        "--default-runtime=butlers-kind-runc",
    ]


def _runtime() -> str:
    """runc (Debian's), installed with docker.io; the wrapper runs it."""
    runc = shutil.which("runc") or "/usr/sbin/runc"
    if not os.access(runc, os.X_OK):
        raise EngineError("the kind lane needs runc (Debian's `runc` package)")
    return runc


def start() -> bool:
    """Start the engine unless it answers already; True when this call started it."""
    if answers():
        return False
    if os.geteuid() != 0:
        raise EngineError("the kind lane starts its own dockerd, which needs root")
    if shutil.which("dockerd") is None:
        from images.engine import EngineUnavailable, install_packages

        try:
            install_packages(["docker.io"], "the kind lane's Docker engine")
        except EngineUnavailable as exc:
            raise EngineError(str(exc)) from None
    _runtime()
    RUN.mkdir(parents=True, exist_ok=True)
    log = pins.cache_root() / "dockerd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            build_dockerd(wrapper()),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while not answers():
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait()
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
            raise EngineError(f"the kind lane's dockerd did not start (see {log}): {tail}")
        time.sleep(0.2)
    return True


def _ours(pid: int) -> bool:
    """Whether `pid` is a dockerd serving this lane's socket (the only one it stops)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and argv[0].endswith(b"dockerd") and f"--host={HOST}".encode() in argv


def stop() -> bool:
    """Stop the lane's engine (its pidfile names it) and remove its run-time state.

    Only a dockerd started with this lane's socket is signalled. True when one was stopped.
    """
    pidfile = RUN / "dockerd.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return False
    if not _ours(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _ours(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _ours(pid):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(RUN / "exec", ignore_errors=True)
    return True
