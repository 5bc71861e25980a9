"""Building the control plane: pins, the build commands, and where binaries are found."""

from __future__ import annotations

from pathlib import Path

from tests.kube import binaries
from tests.kube.binaries import Pins, build_commands, locate, read_pin


def test_the_pins_come_from_the_go_modules() -> None:
    pins = Pins.read()
    assert pins.kubernetes == read_pin(binaries.HACK / "go.mod", "k8s.io/kubernetes")
    assert pins.kubernetes.startswith("v1.") and pins.etcd.startswith("v3.")


def test_every_staging_module_is_replaced_by_its_release_of_the_same_version() -> None:
    go_mod = (binaries.HACK / "go.mod").read_text()
    minor = Pins.read().kubernetes.removeprefix("v1.")
    replaced = [line.split() for line in go_mod.splitlines() if "=> k8s.io/" in line]
    assert len(replaced) > 20
    assert all(version == f"v0.{minor}" for _, _, _, version in replaced)


def test_the_three_kube_commands_build_in_one_invocation_without_debug_information() -> None:
    (kube_dir, kube), (etcd_dir, etcd) = build_commands(Pins.read(), Path("/out"))
    assert kube_dir == binaries.HACK and etcd_dir == binaries.HACK / "etcd"
    assert [a for a in kube if a.startswith("k8s.io/kubernetes/cmd/")] == [
        "k8s.io/kubernetes/cmd/kube-apiserver",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-scheduler",
    ]
    for argv in (kube, etcd):
        assert "-trimpath" in argv and any(a.startswith("-ldflags=-s -w") for a in argv)
    assert any(f"gitVersion={Pins.read().kubernetes}" in a for a in kube)


def test_prebuilt_binaries_must_all_be_there(tmp_path: Path) -> None:
    (tmp_path / "etcd").write_text("")
    (tmp_path / "etcd").chmod(0o755)
    directory, reason = locate({"KUBEBUILDER_ASSETS": str(tmp_path)})
    assert directory is None
    assert reason and "kube-apiserver" in reason and "KUBEBUILDER_ASSETS" in reason


def test_without_binaries_the_reason_says_how_to_build_them(tmp_path: Path) -> None:
    directory, reason = locate({"XDG_CACHE_HOME": str(tmp_path)})
    assert directory is None
    assert reason and "python3 dev.py kube-binaries" in reason and str(tmp_path) in reason
