"""The kind lane's cluster: up (engine, node image, `kind create cluster`) and down.

`up` starts the lane's Docker engine, builds the node image when it is missing or
stale, puts a `kind` on PATH that talks to that engine (`shim_dir`), records the
machine-wide sysctls the node's kubelet changes (it runs privileged: `kernel.panic`,
`kernel.panic_on_oops`, `vm.overcommit_memory`, ...) and creates the cluster of
kind-config.yaml. `down` deletes the cluster and kind's network, restores those
sysctls and stops the engine if `up` started it. Both are safe to repeat.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from . import engine, gobuild, nodeimage, pins

CLUSTER = "butlers"  # kind-config.yaml's name
CONTEXT = f"kind-{CLUSTER}"
CREATE_TIMEOUT = 600.0
# Machine-wide settings a privileged kubelet (or kube-proxy) may write.
SYSCTLS = (
    "kernel/panic",
    "kernel/panic_on_oops",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/netfilter/nf_conntrack_max",
    "fs/inotify/max_user_watches",
    "fs/inotify/max_user_instances",
)
STATE = engine.RUN / "state.json"

Log = Callable[[str], None]


class ClusterError(RuntimeError):
    """A kind step failed; the message has its output."""


def shim_dir() -> Path:
    """A folder with a `kind` that uses the lane's engine (prepend it to PATH)."""
    folder = pins.cache_root() / "shim"
    kind = gobuild.kind_binary()
    script = f'#!/bin/sh\nDOCKER_HOST="{engine.HOST}" exec "{kind}" "$@"\n'
    target = folder / "kind"
    if not target.exists() or target.read_text() != script:
        folder.mkdir(parents=True, exist_ok=True)
        staging = folder / ".kind.tmp"
        staging.write_text(script)
        staging.chmod(0o755)
        staging.rename(target)
    return folder


def kind(*args: str, timeout: float = 300.0, check: bool = True) -> str:
    argv = [str(shim_dir() / "kind"), *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"kind {' '.join(args)}: still running after {timeout:.0f} s") from None
    if check and done.returncode:
        raise ClusterError(f"kind {' '.join(args)} failed:\n{done.stderr.strip()[-3000:]}")
    return done.stdout


def read_sysctls() -> dict[str, str]:
    values = {}
    for name in SYSCTLS:
        try:
            values[name] = Path("/proc/sys", name).read_text().strip()
        except OSError:
            continue
    return values


def restore_sysctls(saved: dict[str, str]) -> list[str]:
    """Write back each saved value that changed; the names restored."""
    restored = []
    for name, value in saved.items():
        path = Path("/proc/sys", name)
        try:
            if path.read_text().strip() != value:
                path.write_text(value)
                restored.append(name.replace("/", "."))
        except OSError:
            continue
    return restored


def _load_state() -> dict[str, object]:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {}


def _save_state(state: dict[str, object]) -> None:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(state))


def exists() -> bool:
    return CLUSTER in kind("get", "clusters", timeout=60).split()


def up(log: Log = print) -> None:
    """The cluster running, with everything it needs built first."""
    started = time.monotonic()
    ours = engine.start()
    state = _load_state()
    if ours:
        state["engine"] = True
    state.setdefault("sysctls", read_sysctls())
    _save_state(state)
    nodeimage.ensure_node_image(log)
    if not exists():
        log(f"kind: kind create cluster --config {pins.KIND_CONFIG.name}")
        kind("create", "cluster", "--name", CLUSTER, "--config", str(pins.KIND_CONFIG),
             "--wait", "180s", timeout=CREATE_TIMEOUT)  # fmt: skip
        state["cluster"] = True
        _save_state(state)
    log(f"kind: cluster {CLUSTER!r} up after {time.monotonic() - started:.0f} s")


def down(log: Log = print) -> None:
    """Delete the cluster and what it left behind; stop the engine if `up` started it."""
    state = _load_state()
    if engine.answers():
        kind("delete", "cluster", "--name", CLUSTER, timeout=180, check=False)
        engine.docker("network", "rm", "kind", check=False, timeout=60)
        engine.docker("container", "prune", "--force", check=False, timeout=60)
        engine.docker("volume", "prune", "--force", check=False, timeout=120)
    restored = restore_sysctls(state.get("sysctls") or {})  # type: ignore[arg-type]
    if restored:
        log(f"kind: restored {', '.join(restored)}")
    if state.get("engine") and engine.stop():
        log("kind: the lane's dockerd stopped")
    STATE.unlink(missing_ok=True)


def environment() -> dict[str, str]:
    """os.environ with the lane's `kind` first on PATH."""
    return {**os.environ, "PATH": f"{shim_dir()}{os.pathsep}{os.environ.get('PATH', '')}"}
