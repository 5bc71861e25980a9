"""The process kubelet's images: what a container image would run, on this machine.

The kubelet runs no container runtime. An image is a local profile instead:
the image's environment, working directory, entrypoint and command (as its
Dockerfile declares them), with this machine's Python environment standing in
for the image's, and how to tell the process the local port each of its
declared container ports was remapped to (all pods share the host network).
An image without a profile fails to start like an image that cannot be pulled.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# containerPort number and port name → local port, for every port the container declares.
Ports = Mapping[int | str, int]
ListenEnv = Callable[[Ports], dict[str, str]]

VENV_BIN = str(Path(sys.executable).parent)
# This machine's files that stand for an image's own: the Python environment (the venv, the
# interpreter it was made from) and the project it has installed in editable mode.
IMAGE_PATHS = tuple(
    dict.fromkeys(
        str(Path(p).resolve())
        for p in (sys.prefix, sys.base_prefix, Path(__file__).resolve().parents[2])
    )
)
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageError(LookupError):
    """No profile for this image: the kubelet reports ErrImagePull."""


def _no_ports(ports: Ports) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class ImageProfile:
    """One image as the process kubelet runs it."""

    pattern: str  # regex matched against the whole image reference
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = "/"
    listen_env: ListenEnv = _no_ports

    def matches(self, image: str) -> bool:
        return re.fullmatch(self.pattern, image) is not None


def python_image_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the project's Python images set (PATH to their venv; unbuffered, no bytecode),
    and the tests' own PYTHONPATH when they have one: the image is the code they run
    (a worktree sharing another checkout's venv), as for the operator backend's pods."""
    pythonpath = os.environ.get("PYTHONPATH")
    return {
        "PATH": f"{VENV_BIN}:{BASE_PATH}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
        **(extra or {}),
    }


def _butler_listen(ports: Ports) -> dict[str, str]:
    # `butlers serve` listens where BUTLERS_HOST/BUTLERS_PORT say (the rendered env says
    # :: and the butler's own port; here: loopback and the remapped port).
    # `butlers dashboard` (the same image, the chart's `dashboard` port) reads
    # BUTLERS_DASHBOARD_HOST/BUTLERS_DASHBOARD_PORT.
    dashboard = ports.get("dashboard")
    if dashboard:
        return {"BUTLERS_DASHBOARD_HOST": "127.0.0.1", "BUTLERS_DASHBOARD_PORT": str(dashboard)}
    port = ports.get("mcp") or next(iter(ports.values()), None)
    return {"BUTLERS_HOST": "127.0.0.1", **({"BUTLERS_PORT": str(port)} if port else {})}


def _operator_listen(ports: Ports) -> dict[str, str]:
    env = {}
    port = ports.get("health") or ports.get(8080)
    if port:
        env["BUTLERS_OPERATOR_LIVENESS_ENDPOINT"] = f"http://127.0.0.1:{port}/healthz"
    metrics = ports.get("metrics")
    if metrics:
        env["BUTLERS_OPERATOR_METRICS_ENDPOINT"] = f"http://127.0.0.1:{metrics}/metrics"
    return env


def _test_python_listen(ports: Ports) -> dict[str, str]:
    # Test pods built on the generic python image read $PORT (their first declared port).
    numbers = [p for p in ports if isinstance(p, int)]
    return {"PORT": str(ports[numbers[0]])} if numbers else {}


# The project's images (images/*/Dockerfile), by repository, any registry and tag.
BUTLERS_IMAGES = (
    ImageProfile(
        pattern=r"(.+/)?butler(:[\w.-]+)?(@sha256:[0-9a-f]+)?",
        entrypoint=("butlers",),
        cmd=("serve", "--spec", "/etc/butlers/butler.yaml"),
        env=python_image_env(),
        workdir="/tmp",
        listen_env=_butler_listen,
    ),
    ImageProfile(
        pattern=r"(.+/)?operator(:[\w.-]+)?(@sha256:[0-9a-f]+)?",
        entrypoint=("python", "-m", "butlers_operator"),
        env=python_image_env(),
        workdir="/tmp",
        listen_env=_operator_listen,
    ),
)
# A plain Python image for the kubelet's own tests (`command: [python, -c, ...]`).
TEST_PYTHON_IMAGE = ImageProfile(
    pattern=r"(docker\.io/(library/)?)?python(:[\w.-]+)?",
    entrypoint=("python3",),
    env=python_image_env(),
    workdir="/tmp",
    listen_env=_test_python_listen,
)


@dataclass(frozen=True)
class Images:
    profiles: tuple[ImageProfile, ...] = (*BUTLERS_IMAGES, TEST_PYTHON_IMAGE)

    def find(self, image: str) -> ImageProfile:
        for profile in self.profiles:
            if profile.matches(image):
                return profile
        raise ImageError(f"image {image!r} has no local profile on the process kubelet")


def build_argv(container: Mapping[str, object], profile: ImageProfile) -> list[str]:
    """command/args over the image's entrypoint/cmd, as a container runtime combines them."""
    command = list(container.get("command") or [])  # type: ignore[call-overload]
    args = list(container.get("args") or [])  # type: ignore[call-overload]
    if command:
        return [*command, *args]
    return [*profile.entrypoint, *(args or profile.cmd)]
