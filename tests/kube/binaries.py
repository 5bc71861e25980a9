"""The control plane's binaries: built from Go modules into a cache, or taken prebuilt.

`hack/kube/go.mod` pins one Kubernetes release (kube-apiserver,
kube-controller-manager, kube-scheduler) and `hack/kube/etcd/go.mod` the etcd
release it names. `python3 dev.py kube-binaries` (this module's `main`) builds
them into `~/.cache/butlers/kube/<version>/`, atomically (a temporary directory
renamed into place, under a lock) and only when they are missing or were built
from other go.mod/go.sum files. `KUBEBUILDER_ASSETS` (envtest's convention)
names a directory of prebuilt binaries instead. Go's module and build caches
live under `~/.cache/butlers/go/` so that CI can cache them.

Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack" / "kube"
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
BINARIES = ("etcd", *KUBE_COMMANDS)
ASSETS_ENV = "KUBEBUILDER_ASSETS"
STAMP = ".built-from"


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "butlers"


def read_pin(go_mod: Path, module: str) -> str:
    """The version `go_mod` requires of `module` (e.g. v1.37.2)."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.M)
    if match is None:
        raise ValueError(f"{go_mod}: no requirement on {module}")
    return match.group(1)


@dataclass(frozen=True)
class Pins:
    kubernetes: str  # v1.37.2
    etcd: str  # v3.7.0
    fingerprint: str  # of every go.mod/go.sum and the build flags

    @classmethod
    def read(cls, hack: Path = HACK) -> Pins:
        files = [
            hack / "go.mod",
            hack / "go.sum",
            hack / "etcd" / "go.mod",
            hack / "etcd" / "go.sum",
        ]
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.read_bytes())
        kubernetes = read_pin(hack / "go.mod", "k8s.io/kubernetes")
        digest.update(" ".join(build_ldflags(kubernetes)).encode())
        return cls(
            kubernetes=kubernetes,
            etcd=read_pin(hack / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
            fingerprint=digest.hexdigest()[:16],
        )


def build_ldflags(kubernetes: str) -> list[str]:
    """No debug information; the version kube-apiserver reports (helm and kubectl read it)."""
    major, minor = kubernetes.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return [
        "-s",
        "-w",
        f"-X {pkg}.gitVersion={kubernetes}",
        f"-X {pkg}.gitMajor={major}",
        f"-X {pkg}.gitMinor={minor}",
        f"-X {pkg}.gitTreeState=clean",
        f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
    ]


def build_go_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Go's caches under ~/.cache/butlers/go (CI caches that directory); static binaries."""
    cache = cache_root(environ) / "go"
    env = dict(environ)
    env.setdefault("GOMODCACHE", str(cache / "mod"))
    env.setdefault("GOCACHE", str(cache / "build"))
    env["GOFLAGS"] = " ".join(filter(None, [env.get("GOFLAGS", ""), "-modcacherw"]))
    env["CGO_ENABLED"] = "0"
    return env


def build_commands(pins: Pins, out: Path, hack: Path = HACK) -> list[tuple[Path, list[str]]]:
    """(working directory, argv) of each `go build`: the three kube commands in one
    invocation (their shared packages are compiled once), then etcd from its own module."""
    ldflags = " ".join(build_ldflags(pins.kubernetes))
    kube = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBE_COMMANDS]
    return [
        (hack, ["go", "build", "-trimpath", f"-ldflags={ldflags}", "-o", f"{out}/", *kube]),
        (
            hack / "etcd",
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags=-s -w",
                "-o",
                str(out / "etcd"),
                "go.etcd.io/etcd/server/v3",
            ],
        ),
    ]


def cache_dir(pins: Pins, environ: Mapping[str, str] = os.environ) -> Path:
    return cache_root(environ) / "kube" / pins.kubernetes


def missing_in(directory: Path) -> list[str]:
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def is_built(directory: Path, pins: Pins) -> bool:
    stamp = directory / STAMP
    return not missing_in(directory) and stamp.exists() and stamp.read_text() == pins.fingerprint


def locate(environ: Mapping[str, str] = os.environ) -> tuple[Path | None, str | None]:
    """(directory with every binary, None) or (None, the one reason they are not available)."""
    assets = environ.get(ASSETS_ENV)
    if assets:
        missing = missing_in(Path(assets))
        if missing:
            return None, f"{ASSETS_ENV}={assets} lacks {', '.join(missing)}"
        return Path(assets), None
    pins = Pins.read()
    directory = cache_dir(pins, environ)
    if is_built(directory, pins):
        return directory, None
    what = "are not built" if not directory.exists() else "are stale"
    go = "" if shutil.which("go") else " (needs Go: go is not on PATH)"
    return None, (
        f"the control plane binaries {pins.kubernetes} {what} in {directory}: run "
        f"`python3 dev.py kube-binaries`{go}, or set {ASSETS_ENV} to prebuilt ones"
    )


def build(environ: Mapping[str, str] = os.environ, log: bool = True) -> Path:
    """Build every binary into the cache unless it is there already; returns the directory."""
    pins = Pins.read()
    target = cache_dir(pins, environ)
    if is_built(target, pins):
        return target
    if shutil.which("go") is None:
        raise SystemExit("kube-binaries: go is not on PATH; install Go 1.26+ or set " + ASSETS_ENV)
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same thing
        if is_built(target, pins):
            return target
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
        try:
            started = time.monotonic()
            env = build_go_env(environ)
            for cwd, argv in build_commands(pins, work):
                if log:
                    print(f"kube-binaries: {' '.join(argv[:2])} … in {cwd}", flush=True)
                # Below other work on a shared machine; the build is long and not urgent.
                subprocess.run(argv, cwd=cwd, env=env, check=True, preexec_fn=lambda: os.nice(10))
            (work / STAMP).write_text(pins.fingerprint)
            if target.exists():
                stale = target.with_name(f".stale-{os.getpid()}-{target.name}")
                target.rename(stale)
                shutil.rmtree(stale, ignore_errors=True)
            work.rename(target)
            if log:
                print(
                    f"kube-binaries: {pins.kubernetes} + etcd {pins.etcd} built in "
                    f"{time.monotonic() - started:.0f} s into {target}",
                    flush=True,
                )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dev.py kube-binaries", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--print-dir", action="store_true", help="print where they are; no build")
    parser.add_argument(
        "--if-possible",
        action="store_true",
        help="without Go, say so and exit 0 (the tests that need the binaries skip)",
    )
    args = parser.parse_args(argv)
    if args.print_dir:
        directory, reason = locate()
        print(directory or reason)
        return 0 if directory else 1
    directory, reason = locate()
    if directory is not None:
        print(f"kube-binaries: up to date in {directory}")
        return 0
    if args.if_possible and shutil.which("go") is None:
        print(f"kube-binaries: not built ({reason}); the tests that need them will skip")
        return 0
    try:
        build()
    except subprocess.CalledProcessError as exc:
        print(
            f"kube-binaries: {' '.join(map(str, exc.cmd))} failed ({exc.returncode})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
