"""The node's Debian root filesystem: debootstrap plus kind's base files, cached as a tar.

The same steps as the kind base image's Dockerfile (its `images/base/files` come from
the pinned `sigs.k8s.io/kind` module), on a `debootstrap --variant=minbase` of Debian
with the packages of `pins.NODE_PACKAGES`, then this lane's changes to containerd's
configuration (see `containerd_config`). Cached as
`~/.cache/butlers/kind/rootfs-<key>.tar`, written to a temporary name first.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import gobuild, pins

TRIM = ("usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/doc", "var/cache/apt",
        "var/lib/apt/lists", "var/log/apt")  # fmt: skip
# Unit links removed as the kind base image does (no udev, no getty, no timers).
UNIT_GLOBS = (
    "lib/systemd/system/multi-user.target.wants/*",
    "etc/systemd/system/*.wants/*",
    "lib/systemd/system/local-fs.target.wants/*",
    "lib/systemd/system/sockets.target.wants/*udev*",
    "lib/systemd/system/sockets.target.wants/*initctl*",
    "lib/systemd/system/basic.target.wants/*",
    "lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
)


class RootfsError(RuntimeError):
    """The node's root filesystem cannot be made here; the message says why."""


def kind_base_files() -> Path:
    kind = pins.BY_NAME["kind"]
    env = gobuild.kube.build_go_env()
    with tempfile.TemporaryDirectory() as tmp:
        module = gobuild.module_dir(kind.module, kind.version, env, Path(tmp))
    return module / "images" / "base" / "files"


def rootfs_key() -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([pins.SUITE, pins.NODE_PACKAGES, TRIM, UNIT_GLOBS]).encode())
    digest.update(pins.BY_NAME["kind"].key().encode())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:12]


def containerd_config(original: str) -> str:
    """kind's containerd config, for this machine.

    `restrict_oom_score_adj`: pods get no lower oom_score_adj than containerd's own (the
    kubelet asks for -998, which needs CAP_SYS_RESOURCE, missing here). The
    fuse-overlayfs proxy plugin is for rootless nodes, which this lane never runs.
    """
    text = original.replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
    text = re.sub(r'\[proxy_plugins\]\n.*?address = "[^"]*"\n', "", text, flags=re.S)
    if "restrict_oom_score_adj = true" not in text:
        raise RootfsError("kind's containerd config has no restrict_oom_score_adj to set")
    return text


def _chroot(root: Path, *argv: str) -> None:
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    done = subprocess.run(
        ["chroot", str(root), *argv], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode:
        raise RootfsError(f"chroot {' '.join(argv)}: {done.stderr.strip()[-800:]}")


def _copy_tree(source: Path, target: Path, mode: int) -> None:
    for path in source.rglob("*"):
        if path.is_dir():
            continue
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        dest.chmod(mode)


def add_kind_files(root: Path, files: Path) -> None:
    """What the kind base Dockerfile copies, with the modes it gives."""
    _copy_tree(files / "usr" / "local" / "bin", root / "usr" / "local" / "bin", 0o755)
    _copy_tree(files / "kind", root / "kind", 0o644)
    _copy_tree(files / "kind" / "bin", root / "kind" / "bin", 0o755)
    _copy_tree(files / "etc", root / "etc", 0o644)
    (root / "kind").chmod(0o755)
    (root / "kind" / "bin").chmod(0o755)
    config = root / "etc" / "containerd" / "config.toml"
    config.write_text(containerd_config(config.read_text()))


def configure_systemd(root: Path) -> None:
    for pattern in UNIT_GLOBS:
        for path in root.glob(pattern):
            path.unlink(missing_ok=True)
    with (root / "etc" / "systemd" / "journald.conf").open("a") as conf:
        conf.write("ReadKMsg=no\n")
    init = root / "sbin" / "init"
    if not init.exists() and not init.is_symlink():
        init.symlink_to("/usr/lib/systemd/systemd")
    for unit in ("kubelet.service", "containerd.service", "undo-mount-hacks.service"):
        _chroot(root, "systemctl", "enable", unit)
    _chroot(root, "systemctl", "mask", "systemd-binfmt.service")
    (root / "etc" / "kubernetes" / "manifests").mkdir(parents=True, exist_ok=True)


def make_rootfs(out: Path) -> None:
    if os.geteuid() != 0:
        raise RootfsError("the node's root filesystem is made with debootstrap, which needs root")
    if shutil.which("debootstrap") is None:
        from images.engine import EngineUnavailable, install_packages

        try:
            install_packages(["debootstrap"], "the kind node's root filesystem")
        except EngineUnavailable as exc:
            raise RootfsError(str(exc)) from None
    files = kind_base_files()
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".rootfs-") as tmp:
        root = Path(tmp, "root")
        argv = ["debootstrap", "--variant=minbase", f"--include={','.join(pins.NODE_PACKAGES)}",
                pins.SUITE, str(root), pins.MIRROR]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        if done.returncode:
            log = root / "debootstrap" / "debootstrap.log"
            detail = log.read_text(errors="replace")[-1500:] if log.exists() else done.stderr
            raise RootfsError(f"debootstrap {pins.SUITE} from {pins.MIRROR} failed:\n{detail}")
        for part in TRIM:
            shutil.rmtree(root / part, ignore_errors=True)
        add_kind_files(root, files)
        configure_systemd(root)
        staging = Path(tmp, "rootfs.tar")
        subprocess.run(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(staging), "."],
            check=True,
        )
        staging.rename(out)


def ensure_rootfs() -> Path:
    """The cached tar of the node's Debian root filesystem (made when missing)."""
    root = pins.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"rootfs-{rootfs_key()}.tar"
    if out.exists():
        return out
    with (root / ".rootfs.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            make_rootfs(out)
    return out
