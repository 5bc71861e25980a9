"""One container of a rendered pod, as `docker run` arguments: how the images lane runs
what the operator renders, the way a kubelet would.

Pure: it turns the pod spec's security context (user, group, read-only root, dropped
capabilities, no privilege escalation), its volumes (emptyDir as tmpfs, ConfigMap and
Secret files bind-mounted read-only from a folder the caller wrote) and its memory limit
into flags; the command, arguments and environment come already resolved from
`tests.e2e.harness.localrun`. Containers share the host's network (engines started with
`--bridge=none` have no other way out), so the container's ports are the host's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from tests.e2e.harness.localrun import ContainerLaunch

UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}


class PodSpecError(ValueError):
    """The pod asks for something this runner does not do."""


def parse_quantity(value: str | int) -> int:
    """A Kubernetes memory quantity (`64Mi`, `1G`, `512`) in bytes."""
    text = str(value)
    for suffix, factor in UNITS.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text))


def _security(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    pod_ctx = pod.get("securityContext") or {}
    ctx = {**pod_ctx, **(container.get("securityContext") or {})}
    flags: list[str] = []
    if "runAsUser" in ctx:
        flags += ["--user", f"{ctx['runAsUser']}:{ctx.get('runAsGroup', ctx['runAsUser'])}"]
    elif ctx.get("runAsNonRoot"):
        raise PodSpecError("runAsNonRoot without runAsUser: the image's user cannot be checked")
    if "fsGroup" in pod_ctx:
        flags += ["--group-add", str(pod_ctx["fsGroup"])]
    if ctx.get("readOnlyRootFilesystem"):
        flags.append("--read-only")
    if ctx.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    capabilities = ctx.get("capabilities") or {}
    flags += [arg for cap in capabilities.get("drop") or [] for arg in ("--cap-drop", cap)]
    flags += [arg for cap in capabilities.get("add") or [] for arg in ("--cap-add", cap)]
    return flags


def _volumes(pod: Mapping[str, Any], container: Mapping[str, Any], files_root: str) -> list[str]:
    by_name = {volume["name"]: volume for volume in pod.get("volumes") or []}
    flags: list[str] = []
    for mount in container.get("volumeMounts") or []:
        volume = by_name[mount["name"]]
        path = mount["mountPath"]
        if "emptyDir" in volume:
            size = (volume["emptyDir"] or {}).get("sizeLimit")
            options = "rw,nosuid,nodev,mode=1777"
            if size:
                options += f",size={parse_quantity(size)}"
            flags += ["--tmpfs", f"{path}:{options}"]
        elif "configMap" in volume or "secret" in volume:
            source = str(PurePosixPath(files_root) / path.lstrip("/"))
            flags += ["--mount", f"type=bind,source={source},target={path},readonly"]
        else:
            raise PodSpecError(f"volume {mount['name']!r}: only emptyDir, configMap and secret")
    return flags


def build_env_file(launch: ContainerLaunch) -> str:
    """The container's environment as a `docker run --env-file` (kept off the command line)."""
    lines = []
    for key, value in sorted(launch.env.items()):
        if "\n" in value:
            raise PodSpecError(f"environment variable {key} holds a newline")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def build_docker_run(
    deployment: Mapping[str, Any],
    launch: ContainerLaunch,
    *,
    image: str,
    name: str,
    env_file: str,
    files_root: str,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """`docker run` for one container of the Deployment's pod (detached, not removed).

    `files_root` holds the launch's files at their mount paths (`files_root/etc/...`).
    """
    pod = deployment["spec"]["template"]["spec"]
    containers = [*(pod.get("initContainers") or []), *pod["containers"]]
    container = next(c for c in containers if c["name"] == launch.name)
    memory = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    argv = [
        "docker", "run", "--detach", "--name", name, "--network", "host",
        "--env-file", env_file,
        *_security(pod, container),
        *_volumes(pod, container, files_root),
        *(["--memory", str(parse_quantity(memory))] if memory else []),
        *(["--workdir", container["workingDir"]] if container.get("workingDir") else []),
        *extra,
        "--entrypoint", launch.argv[0],
        image,
        *launch.argv[1:],
    ]  # fmt: skip
    return argv
