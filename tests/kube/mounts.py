"""A container's filesystem view: its volumes at their mount paths, in a mount namespace.

Each container process starts under `unshare --mount` with a short shell
script (built here, purely) that bind-mounts the pod's volume directories at
the container's `mountPath`s, gives the pod its own /etc/hosts (cluster names →
this machine) and, with `readOnlyRootFilesystem`, remounts / read-only, so a
process that writes outside its volumes fails here as it would in a cluster.
A mount path that does not exist on this machine is created inside an overlay
of its nearest existing parent: nothing is ever created on the host itself.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

UNSHARE = ("unshare", "--mount", "--propagation", "private")


class MountError(ValueError):
    """A mount the process kubelet cannot make without changing the host."""


@dataclass(frozen=True)
class Mount:
    source: str  # a directory of the pod, or one file in it (subPath)
    target: str  # the container's mountPath
    read_only: bool = False
    is_file: bool = False


def _ancestors(path: str) -> list[str]:
    parts = PurePosixPath(path).parents
    return [str(p) for p in parts]


def overlay_roots(
    targets: Iterable[str], exists: Callable[[str], bool] = os.path.exists
) -> list[str]:
    """The outermost existing directories that must be overlaid so that every missing
    mount target can be created without touching the host."""
    roots: set[str] = set()
    for target in targets:
        if exists(target):
            continue
        parent = next(p for p in _ancestors(target) if exists(p))
        if parent == "/":
            raise MountError(f"mount path {target} would need a new directory at / on this machine")
        roots.add(parent)
    outermost = [
        r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots)
    ]
    return sorted(outermost)


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _mount_point(path: str, is_file: bool) -> list[str]:
    """Lines that make `path` exist as what will be mounted on it (a file or a directory)."""
    if not is_file:
        return [f"mkdir -p {shlex.quote(path)}"]
    parent, target = shlex.quote(str(PurePosixPath(path).parent)), shlex.quote(path)
    return [f"mkdir -p {parent}", f"[ -e {target} ] || : > {target}"]


def build_mount_script(
    mounts: Sequence[Mount],
    hosts_file: str,
    pod_root: str,
    overlay_dir: str,
    workdir: str,
    read_only_root: bool = False,
    keep: Sequence[str] = (),
    exists: Callable[[str], bool] = os.path.exists,
) -> str:
    """The shell script that sets up the mounts and then execs "$@" in `workdir`.

    Targets are given as real paths (symlinks such as /var/run resolved by the caller);
    `hosts_file` and `overlay_dir` (the overlays' upper directories) live under `pod_root`,
    which no mount may hide. `keep` are this machine's paths that stand for the image's own
    files (its Python environment): a volume mounted over one of them gets it back,
    read-only, at the same path. Every source outside `pod_root` is first bound into
    `pod_root/stage/` while it is still visible.
    """
    q = shlex.quote
    lines = ["set -e"]
    for mount in mounts:
        if _is_under(pod_root, mount.target):
            raise MountError(
                f"mount path {mount.target} would hide the kubelet's pod directory {pod_root}"
            )
    roots = overlay_roots([m.target for m in mounts], exists)
    for root in roots:
        if _is_under(pod_root, root):
            raise MountError(f"an overlay of {root} would contain the pod's own directory")
    hidden_image = [
        Mount(path, path, read_only=True)
        for path in keep
        if any(_is_under(path, m.target) for m in mounts)
    ]
    everything = [*mounts, *hidden_image]
    staged: dict[str, str] = {}
    for index, mount in enumerate(everything):
        if not _is_under(mount.source, pod_root) and mount.source not in staged:
            stage = f"{pod_root}/stage/{index}"
            staged[mount.source] = stage
            lines += _mount_point(stage, mount.is_file)
            lines.append(f"mount --bind {q(mount.source)} {q(stage)}")
    for index, root in enumerate(roots):
        upper, work = f"{overlay_dir}/{index}/upper", f"{overlay_dir}/{index}/work"
        lines.append(f"mkdir -p {q(upper)} {q(work)}")
        options = f"lowerdir={root},upperdir={upper},workdir={work}"
        lines.append(f"mount -t overlay overlay -o {q(options)} {q(root)}")
    for mount in sorted(everything, key=lambda m: (len(PurePosixPath(m.target).parts), m.target)):
        target = q(mount.target)
        lines += _mount_point(mount.target, mount.is_file)
        lines.append(f"mount --bind {q(staged.get(mount.source, mount.source))} {target}")
        if mount.read_only:
            lines.append(f"mount -o remount,bind,ro {target}")
    lines.append(f"mount --bind {q(hosts_file)} /etc/hosts")
    if read_only_root:
        lines.append("mount -o remount,bind,ro /")
        lines.extend(f"mount -o remount,ro {q(root)}" for root in roots)
    lines.append(f"cd {q(workdir)}")
    lines.append('exec "$@"')
    return "\n".join(lines)


def build_container_argv(script: str, argv: Sequence[str]) -> list[str]:
    """unshare + sh running the mount script, then the container's own argv."""
    return [*UNSHARE, "sh", "-c", script, "container", *argv]


def build_hosts_file(pod_ip: str, pod_name: str, api_address: str) -> str:
    """/etc/hosts of a pod: itself, and the API server under its in-cluster names."""
    api_names = (
        "kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local"
    )
    return (
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        f"{pod_ip}\t{pod_name}\n{api_address}\t{api_names}\n"
    )
