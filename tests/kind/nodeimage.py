"""The kind node image, assembled here the way `kind build node-image` would make it.

`kind build node-image` fetches kindnetd, the storage images and etcd even when given
them, so the same steps are taken by hand: the node's Debian root filesystem
(`rootfs`), containerd, crictl and the CNI plugins in it, kubelet/kubeadm/kubectl in
/usr/bin, `/kind/version`, the files of `hack/kind/node/` (the CNI bridge
configuration, the default CNI and storage manifests kind applies), every image of
`images.node_images` imported into containerd's `k8s.io` namespace (pinned, not
unpacked: a containerd run on this machine against the node's own data directory),
then `docker import` into the lane's engine with kind's entrypoint. The image is
named `pins.NODE_IMAGE` (what kind-config.yaml names) and labelled with
`pins.node_image_key()`: another key means a rebuild.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from tests.kube import binaries as kube

from . import engine, gobuild, images, pins, rootfs

Log = Callable[[str], None]
T = TypeVar("T")
BUILT_STAMP = "node-image.key"  # the key of the node image last seen in the engine


def timed(log: Log, what: str, step: Callable[[], T]) -> T:
    started = time.monotonic()
    result = step()
    log(f"kind: {what}: {time.monotonic() - started:.0f} s")
    return result


def current_key() -> str | None:
    """The key of the node image in the lane's engine, None when there is none."""
    out = engine.docker(
        "image", "inspect", "--format", f'{{{{index .Config.Labels "{pins.KEY_LABEL}"}}}}',
        pins.NODE_IMAGE, check=False, timeout=30,
    )  # fmt: skip
    return out.strip() or None


def cri_base_spec(ctr: Path) -> str:
    """containerd's default OCI spec, as the kind base image makes it (its product-files hook,
    no rlimits)."""
    spec = json.loads(subprocess.run([str(ctr), "oci", "spec"], capture_output=True,
                                     check=True, text=True).stdout)  # fmt: skip
    hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
    hooks.append({"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    return json.dumps(spec, indent=2)


def _install(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(0o755)


def add_programs(root: Path, go: dict[str, Path], node: Path) -> None:
    containerd = go["containerd"]
    for name in ("containerd", "ctr", "containerd-shim-runc-v2"):
        _install(containerd / name, root / "usr/local/bin" / name)
    _install(go["cri-tools"] / "crictl", root / "usr/local/bin/crictl")
    for name in pins.CNI_BIN:
        _install(go["cni-plugins"] / name, root / "opt/cni/bin" / name)
    for name in ("kubelet", "kubeadm", "kubectl"):
        _install(node / name, root / "usr/bin" / name)
    for path in (pins.HACK / "node").rglob("*"):
        if path.is_file():
            target = root / path.relative_to(pins.HACK / "node")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    (root / "kind/version").write_text(pins.KUBERNETES)
    (root / "etc/containerd/cri-base.json").write_text(cri_base_spec(containerd / "ctr"))


def import_images(root: Path, containerd: Path, archives: list[Path], work: Path) -> None:
    """Each archive into the node's containerd data, through a containerd run here."""
    sock = work / "containerd.sock"
    config = work / "containerd.toml"
    config.write_text(
        "version = 3\n"
        f'root = "{root}/var/lib/containerd"\n'
        f'state = "{work}/state"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime",'
        ' "io.containerd.cri.v1.images", "io.containerd.nri.v1.nri"]\n'
        f'[grpc]\n  address = "{sock}"\n'
        f'[ttrpc]\n  address = "{sock}.ttrpc"\n'
    )
    log = (work / "containerd.log").open("wb")
    daemon = subprocess.Popen(
        [str(containerd / "containerd"), "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    ctr = [str(containerd / "ctr"), "--address", str(sock), "--namespace", "k8s.io"]
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([*ctr, "version"], capture_output=True).returncode:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise images_error(work, "containerd did not start")
            time.sleep(0.2)
        for archive in archives:
            done = subprocess.run(
                [*ctr, "images", "import", "--label=io.cri-containerd.pinned=pinned",
                 "--no-unpack", "--digests", str(archive)],
                capture_output=True, text=True,
            )  # fmt: skip
            if done.returncode:
                raise images_error(work, f"ctr images import {archive.name}: {done.stderr}")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()


def images_error(work: Path, what: str) -> RuntimeError:
    tail = (work / "containerd.log").read_text(errors="replace").strip().splitlines()[-8:]
    return RuntimeError(f"node image: {what}\n" + "\n".join(tail))


def assemble(key: str, log: Log) -> None:
    # The root filesystem is debootstrap's downloads and dpkg, the rest Go compiles: the
    # two overlap. The control plane comes before the node's Kubernetes binaries, so
    # that they reuse its compiled packages (and wait for a build already under way).
    with ThreadPoolExecutor(max_workers=1) as pool:
        log("kind: the node's Debian root filesystem (in the background)")
        rootfs_done = pool.submit(timed, log, "the node's Debian root filesystem",
                                  rootfs.ensure_rootfs)  # fmt: skip
        try:
            go = gobuild.ensure_all(log)
            control_plane = timed(log, "the control plane binaries", kube.build)
            log(f"kind: kubelet, kubeadm, kubectl, kube-proxy {pins.KUBERNETES}")
            node = timed(log, "the node's Kubernetes binaries", gobuild.ensure_kube_node)
        finally:
            base = rootfs_done.result()
    cache = pins.cache_root()
    with tempfile.TemporaryDirectory(dir=cache, prefix=".node-") as tmp:
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "-xpf", str(base), "-C", str(root)],
                       check=True)  # fmt: skip
        add_programs(root, go, node)
        log("kind: the node's images (OCI archives), imported into its containerd")
        (work / "images").mkdir()
        step = time.monotonic()
        pause = images.build_pause(work / "pause")
        wanted = images.node_images(control_plane, node, go, pause, root / "etc")
        archives = images.write_all(wanted, base, work / "images")
        import_images(root, go["containerd"], archives, work)
        log(f"kind: the node's images built and imported: {time.monotonic() - step:.0f} s")
        shutil.rmtree(work / "images")
        log(f"kind: docker import {pins.NODE_IMAGE}")
        changes = [
            'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
            "ENV container=docker",
            f"LABEL {pins.KEY_LABEL}={key}",
        ]
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", "-", "."],
            stdout=subprocess.PIPE,
        )
        argv = ["docker", "import", *(a for c in changes for a in ("--change", c)), "-"]
        done = subprocess.run([*argv, pins.NODE_IMAGE], stdin=tar.stdout, env=engine.env(),
                              capture_output=True, text=True)  # fmt: skip
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
        if done.returncode or tar.returncode:
            raise RuntimeError(f"docker import {pins.NODE_IMAGE}: {done.stderr.strip()}")


def ensure_node_image(log: Log = print) -> str:
    """The node image in the lane's engine (which must answer), built when missing or stale."""
    key = pins.node_image_key()
    cache = pins.cache_root()
    if current_key() != key:
        cache.mkdir(parents=True, exist_ok=True)
        with (cache / ".node-image.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if current_key() != key:
                started = time.monotonic()
                assemble(key, log)
                log(f"kind: {pins.NODE_IMAGE} built in {time.monotonic() - started:.0f} s")
    # What `lane.node_image_reason` reads without starting the engine.
    (cache / BUILT_STAMP).write_text(key)
    return pins.NODE_IMAGE
