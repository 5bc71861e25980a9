"""The kind lane inside a pytest session: everything prepared before the first test.

`prepare` (from tests/e2e/conftest.py's session start, outside any test's timeout)
brings the cluster up (`cluster.up`: engine, node image, `kind create cluster`),
puts the lane's `kind` first on PATH, names the lane's engine for the harness's
docker commands (`DOCKER_HOST_ENV`), and builds both of the project's images on the
images lane's engine, from which `kind load` takes them. `finish` takes it all down
again unless BUTLERS_KIND_KEEP=1 (for iterating on one cluster; `dev.py kind down`
later). A machine that cannot run the lane gets one reason, and the tests skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from . import cluster, engine, pins

DOCKER_HOST_ENV = "BUTLERS_KIND_DOCKER_HOST"  # harness/kind_commands.py reads these two
NODE_POSTGRES_ENV = "BUTLERS_KIND_POSTGRES_IMAGE"
KEEP_ENV = "BUTLERS_KIND_KEEP"


def unavailable_reason() -> str | None:
    """None when this machine can run the lane; otherwise the one thing it lacks."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "the kind lane runs its own dockerd and builds its node image: needs Linux and root"
    if shutil.which("apt-get") is None and shutil.which("dockerd") is None:
        return "the kind lane needs Docker (dockerd), or apt-get to install Debian's docker.io"
    if shutil.which("go") is None and not _cached():
        return "the kind lane builds its node image from Go modules: go is not on PATH"
    return None


def node_image_reason() -> str | None:
    """None when the lane can run here and its node image is built (as of the last
    `dev.py kind image`); otherwise why not."""
    reason = unavailable_reason()
    if reason is not None:
        return reason
    from .nodeimage import BUILT_STAMP

    stamp = pins.cache_root() / BUILT_STAMP
    if not stamp.exists() or stamp.read_text() != pins.node_image_key():
        return f"its node image {pins.NODE_IMAGE} is not built (`python3 dev.py kind image`)"
    return None


def _cached() -> bool:
    from . import gobuild

    root = pins.cache_root() / "bin"
    return all((root / f"{c.name}-{c.key()}" / gobuild.STAMP).exists() for c in pins.COMPONENTS)


def build_project_images() -> None:
    """`python -m images.build` for both images (a cache hit when the images lane ran)."""
    from tests.e2e.harness import kind_commands as k

    target = k.KindTarget(namespace="-")
    for argv in k.build_image_builds(pins.ROOT, target):
        subprocess.run(argv, cwd=pins.ROOT, check=True, stdin=subprocess.DEVNULL)


def prepare(log: object = print) -> None:
    started = time.monotonic()
    cluster.up(log)  # type: ignore[arg-type]
    os.environ["PATH"] = f"{cluster.shim_dir()}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ[DOCKER_HOST_ENV] = engine.HOST
    os.environ[NODE_POSTGRES_ENV] = pins.POSTGRES_IMAGE
    build_project_images()
    log(f"kind: lane ready in {time.monotonic() - started:.0f} s")  # type: ignore[operator]


def finish(log: object = print) -> None:
    if os.environ.get(KEEP_ENV) == "1":
        log(f"kind: cluster kept ({KEEP_ENV}=1); `python3 dev.py kind down` removes it")  # type: ignore[operator]
        return
    cluster.down(log)  # type: ignore[arg-type]
