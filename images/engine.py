"""The Docker engine the image builds and the images lane use: reuse, start or install one.

An engine that answers `docker info` is used as it is. Otherwise, as root, the
engine is started the way it runs on machines without a bridge or iptables
(`dockerd --bridge=none --iptables=false`, left running for later runs) and, where
it is missing, installed first from Debian (`docker.io`). Anything else is an
`EngineUnavailable` with one reason naming what is missing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 60.0
INSTALL_TIMEOUT = 900.0
DOCKERD_ARGS = ("--bridge=none", "--iptables=false")


class EngineUnavailable(RuntimeError):
    """No Docker engine can run here; the message says why."""


def cache_dir(*parts: str) -> Path:
    """`~/.cache/butlers/...` (or `$BUTLERS_CACHE_DIR/...`), created on first use."""
    root = os.environ.get("BUTLERS_CACHE_DIR") or (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "butlers"
    )
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every process of this machine (test sessions, CI)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def docker(
    *args: str,
    check: bool = True,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the docker client; a failure raises with its output."""
    try:
        result = subprocess.run(
            ["docker", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except subprocess.TimeoutExpired:
        command = " ".join(args)
        raise RuntimeError(f"docker {command}: still running after {timeout:.0f} s") from None
    if check and result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-2000:]
        raise RuntimeError(f"docker {' '.join(args)} exited with {result.returncode}:\n{output}")
    return result


def engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        result = docker("info", "--format", "{{.ServerVersion}}", check=False, timeout=20)
    except RuntimeError:
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


def _is_root() -> bool:
    return os.geteuid() == 0


def _apt_install(packages: Sequence[str]) -> None:
    """`apt-get install` (refreshing the package lists once if the first try fails)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    for attempt in range(2):
        if attempt:
            subprocess.run(
                ["apt-get", "update", "-q"], env=env, capture_output=True, timeout=INSTALL_TIMEOUT
            )
        result = subprocess.run(
            install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
        if result.returncode == 0:
            return
    raise EngineUnavailable(
        f"`apt-get install {' '.join(packages)}` failed: {result.stderr.strip()[-500:]}"
    )


def install_packages(packages: Sequence[str], what: str) -> None:
    """Install Debian packages as root; otherwise say what to install."""
    if not _is_root() or shutil.which("apt-get") is None:
        raise EngineUnavailable(
            f"{what} needs {', '.join(packages)}: not installed, and installing it needs "
            "root and apt-get (Debian's packages)"
        )
    _apt_install(packages)


def _start_dockerd(log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            ["dockerd", *DOCKERD_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this process, for later runs
        )


def ensure_engine(install: bool = True) -> None:
    """A Docker engine that answers, or `EngineUnavailable` with the reason."""
    if engine_answers():
        return
    with file_lock(cache_dir("docker") / "engine.lock"):
        if engine_answers():  # another process started it meanwhile
            return
        if shutil.which("dockerd") is None or shutil.which("docker") is None:
            if not install:
                raise EngineUnavailable("no Docker engine: dockerd is not installed")
            install_packages(["docker.io"], "a Docker engine")
        if not _is_root():
            raise EngineUnavailable(
                "the Docker engine does not answer and starting dockerd needs root"
            )
        log = cache_dir("docker") / "dockerd.log"
        process = _start_dockerd(log)
        deadline = time.monotonic() + START_TIMEOUT
        while not engine_answers():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-5:]
                raise EngineUnavailable(
                    f"dockerd {' '.join(DOCKERD_ARGS)} did not start (see {log}): "
                    + " | ".join(tail)
                )
            time.sleep(0.2)
