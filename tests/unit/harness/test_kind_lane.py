"""The kind lane's pieces that need no Docker, Go or cluster: the runc wrapper's rewrite,
containerd's configuration, the OCI archives, the pins kind-config.yaml must agree with."""

from __future__ import annotations

import hashlib
import json
import runpy
import tarfile
from pathlib import Path

import yaml

from tests.kind import images, pins, rootfs

WRAPPER = runpy.run_path(str(pins.HACK / "runc-wrapper"))
CAPS = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]


def _spec() -> dict[str, object]:
    sets = ("bounding", "effective", "permitted", "inheritable", "ambient")
    return {"process": {"args": ["sh"], "capabilities": {s: list(CAPS) for s in sets}}}


def test_the_wrapper_drops_cap_sys_resource_from_a_containers_spec(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_spec()))
    WRAPPER["rewrite"](str(tmp_path / "config.json"), inside_process=False)
    caps = json.loads((tmp_path / "config.json").read_text())["process"]["capabilities"]
    assert all(names == ["CAP_CHOWN", "CAP_NET_ADMIN"] for names in caps.values())


def test_the_wrapper_drops_it_from_an_exec_process_too(tmp_path: Path) -> None:
    process = tmp_path / "process.json"
    process.write_text(json.dumps(_spec()["process"]))
    WRAPPER["rewrite"](str(process), inside_process=True)
    assert "CAP_SYS_RESOURCE" not in process.read_text()
    assert WRAPPER["option"](["exec", "--process", "/p", "id"], "--process") == "/p"
    assert WRAPPER["option"](["create", "--bundle=/b", "id"], "--bundle") == "/b"


def test_containerd_keeps_pods_oom_score_adj_within_what_it_may_set() -> None:
    kind_config = (
        '[proxy_plugins]\n[proxy_plugins."fuse-overlayfs"]\n  type = "snapshot"\n'
        '  address = "/run/containerd-fuse-overlayfs.sock"\n\n'
        '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = false\n'
    )
    config = rootfs.containerd_config(kind_config)
    assert "restrict_oom_score_adj = true" in config
    assert "fuse-overlayfs" not in config


def test_an_image_archive_is_an_oci_layout_with_every_name(tmp_path: Path) -> None:
    program = tmp_path / "pause"
    program.write_bytes(b"\x7fELF fake")
    image = images.Image(
        names=("registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10"),
        files={"/pause": program},
        entrypoint=("/pause",),
    )
    out = tmp_path / "pause.tar"
    images.write_archive(image, tmp_path / "unused-debian.tar", out)
    with tarfile.open(out) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        names = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
        assert names == list(image.names)
        digest = index["manifests"][0]["digest"].removeprefix("sha256:")
        manifest_bytes = tar.extractfile(f"blobs/sha256/{digest}").read()  # type: ignore[union-attr]
        assert hashlib.sha256(manifest_bytes).hexdigest() == digest
        manifest = json.loads(manifest_bytes)
        layer = manifest["layers"][0]["digest"].removeprefix("sha256:")
        with tarfile.open(fileobj=tar.extractfile(f"blobs/sha256/{layer}")) as inner:
            member = inner.getmember("pause")
            assert (member.mode, member.uid, member.mtime) == (0o755, 0, 0)
        config_digest = manifest["config"]["digest"].removeprefix("sha256:")
        config = json.load(tar.extractfile(f"blobs/sha256/{config_digest}"))  # type: ignore[arg-type]
        assert config["config"]["Entrypoint"] == ["/pause"]
        assert config["rootfs"]["diff_ids"] == [f"sha256:{layer}"]


def test_the_same_inputs_make_the_same_archive(tmp_path: Path) -> None:
    program = tmp_path / "etcd"
    program.write_bytes(b"etcd")
    image = images.Image(names=("registry.k8s.io/etcd:3.7.0-0",), files={"/usr/bin/etcd": program})
    first, second = tmp_path / "1.tar", tmp_path / "2.tar"
    images.write_archive(image, tmp_path / "x", first)
    images.write_archive(image, tmp_path / "x", second)
    with tarfile.open(first) as a, tarfile.open(second) as b:
        assert json.load(a.extractfile("index.json")) == json.load(b.extractfile("index.json"))  # type: ignore[arg-type]


def test_kind_config_names_the_node_image_and_the_kubernetes_version() -> None:
    config = yaml.safe_load(pins.KIND_CONFIG.read_text())
    assert [n["image"] for n in config["nodes"]] == [pins.NODE_IMAGE]
    assert pins.NODE_IMAGE.endswith(f":{pins.KUBERNETES}")
    assert "failCgroupV1: false" in "".join(config["kubeadmConfigPatches"])


def test_a_changed_patch_changes_the_node_images_key(tmp_path: Path) -> None:
    knp = pins.BY_NAME["kube-network-policies"]
    patch = tmp_path / "p.patch"
    patch.write_text("one")
    before = pins.GoComponent(**{**knp.__dict__, "patch": patch}).key()
    patch.write_text("two")
    assert pins.GoComponent(**{**knp.__dict__, "patch": patch}).key() != before


def _requirements(go_mod: Path) -> dict[str, str]:
    import re

    return dict(re.findall(r"^\s+(\S+) (v\S+)", go_mod.read_text(), re.M))


def test_the_node_binaries_come_from_the_control_planes_versions() -> None:
    control_plane = _requirements(pins.ROOT / "hack" / "kube" / "go.mod")
    node = _requirements(pins.KUBE_NODE_MODULE / "go.mod")
    assert control_plane["k8s.io/kubernetes"] == pins.KUBERNETES
    assert {m: node.get(m) for m in control_plane} == control_plane


# The plugins of the Corefile kubeadm writes for CoreDNS (its `coredns` ConfigMap).
KUBEADM_COREFILE_PLUGINS = ("errors", "health", "ready", "kubernetes", "metrics", "forward",
                            "cache", "loop", "reload", "loadbalance")  # fmt: skip


def test_the_nodes_coredns_is_the_pinned_release_with_the_corefiles_plugins() -> None:
    coredns = pins.BY_NAME["coredns"]
    assert coredns.local is not None
    go_mod = (coredns.local / "go.mod").read_text()
    assert f"require {coredns.module} {coredns.version}\n" in go_mod
    main = (coredns.local / "main.go").read_text()
    for plugin in KUBEADM_COREFILE_PLUGINS:
        assert f'"{coredns.module}/plugin/{plugin}"' in main, plugin
