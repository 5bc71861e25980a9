"""Static Go builds of the node's programs, cached by key under ~/.cache/butlers/kind/bin.

A component without a patch is `go install MODULE/PKG@VERSION` (its own go.mod, as
its release builds it). One with a `local` main package (CoreDNS with fewer plugins) is
`go build` in that folder. A patched one is built from a copy of the module's source
with the patch applied (`git apply`), so the patch is checked against the pinned
source at every build. The Kubernetes node binaries are built from `hack/kube`,
the control plane's module, with the control plane's flags. Writes go to a temporary
folder renamed into place, under a lock; Go's caches are the control plane's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.kube import binaries as kube

from . import pins

STAMP = ".complete"


class BuildError(RuntimeError):
    """A Go build failed; the message has the command and its output's end."""


def go_env() -> dict[str, str]:
    env = kube.build_go_env()
    env["GOFLAGS"] = env["GOFLAGS"] + " -mod=mod"
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}  (in {cwd})\n")
        out.flush()
        code = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=lambda: os.nice(10),
        ).returncode
    if code:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise BuildError(f"{' '.join(argv[:3])} … failed ({code}); {log}:\n" + "\n".join(tail))


def _build_flags(component: pins.GoComponent) -> list[str]:
    flags = ["-trimpath", f"-ldflags={' '.join(component.ldflags)}"]
    if component.tags:
        flags.append(f"-tags={','.join(component.tags)}")
    return flags


def module_dir(module: str, version: str, env: dict[str, str], cwd: Path) -> Path:
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    info = json.loads(out.stdout or "{}")
    if out.returncode or "Dir" not in info:
        raise BuildError(f"go mod download {module}@{version}: {info.get('Error') or out.stderr}")
    return Path(info["Dir"])


def build_component(component: pins.GoComponent, out: Path, log: Path) -> None:
    env = kube.build_go_env()
    work = Path(tempfile.mkdtemp(prefix="go-", dir=out.parent))
    try:
        if component.local is not None:
            [name] = component.binaries()
            argv = ["go", "build", *_build_flags(component), "-o", str(out / name), "."]
            _run(argv, component.local, env, log)
            return
        if component.patch is None:
            env["GOBIN"] = str(out)
            targets = [
                f"{component.module}{'' if p == '.' else '/' + p}@{component.version}"
                for p in component.packages
            ]
            _run(["go", "install", *_build_flags(component), *targets], work, env, log)
            return
        env = go_env()
        source = work / "src"
        shutil.copytree(module_dir(component.module, component.version, env, work), source)
        subprocess.run(["chmod", "-R", "u+w", str(source)], check=True)
        _run(["git", "apply", "--verbose", str(component.patch)], source, env, log)
        for package, name in zip(component.packages, component.binaries(), strict=True):
            argv = ["go", "build", *_build_flags(component), "-o", str(out / name), f"./{package}"]
            _run(argv, source, env, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_kube_node(out: Path, log: Path) -> None:
    """kubelet, kubeadm, kubectl and kube-proxy of the control plane's release."""
    ldflags = " ".join(kube.build_ldflags(pins.KUBERNETES))
    packages = [f"k8s.io/kubernetes/cmd/{name}" for name in pins.KUBE_NODE_COMMANDS]
    argv = ["go", "build", "-trimpath", f"-ldflags={ldflags}", "-o", f"{out}/", *packages]
    _run(argv, pins.KUBE_NODE_MODULE, kube.build_go_env(), log)


def _ensure(name: str, key: str, binaries: tuple[str, ...], build: object) -> Path:
    root = pins.cache_root() / "bin"
    target = root / f"{name}-{key}"
    if (target / STAMP).exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{name}.lock").open("w") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / STAMP).exists():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        log = root / f"{name}.log"
        log.write_text("")
        try:
            build(staging, log)  # type: ignore[operator]
            missing = [b for b in binaries if not os.access(staging / b, os.X_OK)]
            if missing:
                raise BuildError(f"{name}: the build made no {', '.join(missing)} (see {log})")
            (staging / STAMP).write_text(key)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_component(component: pins.GoComponent) -> Path:
    """The folder holding the component's binaries, built when missing."""
    return _ensure(
        component.name,
        component.key(),
        component.binaries(),
        lambda out, log: build_component(component, out, log),
    )


def ensure_kube_node() -> Path:
    return _ensure(
        f"kubernetes-{pins.KUBERNETES}",
        pins.kube_node_key(),
        pins.KUBE_NODE_COMMANDS,
        build_kube_node,
    )


def ensure_all(log: object = print) -> dict[str, Path]:
    """Every Go program of the node image but the Kubernetes ones (`ensure_kube_node`)."""
    built: dict[str, Path] = {}
    for component in pins.COMPONENTS:
        log(f"kind: {component.name} {component.version}")  # type: ignore[operator]
        started = time.monotonic()
        built[component.name] = ensure_component(component)
        log(f"kind: {component.name}: {time.monotonic() - started:.0f} s")  # type: ignore[operator]
    return built


def kind_binary() -> Path:
    return ensure_component(pins.BY_NAME["kind"]) / "kind"
