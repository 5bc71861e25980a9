"""A container's mount namespace script: volumes at their paths, nothing made on the host."""

from __future__ import annotations

import pytest

from tests.kube.mounts import Mount, MountError, build_mount_script, overlay_roots

HOST = {"/", "/etc", "/tmp", "/run", "/var", "/var/tmp", "/var/tmp/kubelet", "/var/tmp/spans"}


def exists(path: str) -> bool:
    return path in HOST


def script(mounts: list[Mount], read_only: bool = False) -> list[str]:
    return build_mount_script(
        mounts,
        hosts_file="/var/tmp/kubelet/pod/hosts",
        pod_root="/var/tmp/kubelet/pod",
        overlay_dir="/var/tmp/kubelet/pod/overlay/c",
        workdir="/tmp",
        read_only_root=read_only,
        exists=exists,
    ).splitlines()


def test_a_missing_mount_path_is_made_inside_an_overlay_of_its_nearest_parent() -> None:
    assert overlay_roots(["/etc/butlers", "/etc/creds/x", "/tmp"], exists) == ["/etc"]
    assert overlay_roots(["/run/secrets/kubernetes.io/serviceaccount"], exists) == ["/run"]


def test_nothing_is_overlaid_when_every_mount_path_exists() -> None:
    assert overlay_roots(["/tmp", "/etc"], exists) == []


def test_a_mount_path_that_needs_a_new_top_level_directory_is_refused() -> None:
    with pytest.raises(MountError, match="/data"):
        overlay_roots(["/data"], exists)


def test_volumes_are_bound_parents_first_and_read_only_ones_remounted() -> None:
    lines = script(
        [
            Mount("/var/tmp/kubelet/pod/volumes/spec", "/etc/butlers", read_only=True),
            Mount("/var/tmp/kubelet/pod/volumes/tmp", "/tmp"),
        ]
    )
    binds = [line for line in lines if line.startswith("mount --bind")]
    assert binds == [
        "mount --bind /var/tmp/kubelet/pod/volumes/tmp /tmp",
        "mount --bind /var/tmp/kubelet/pod/volumes/spec /etc/butlers",
        "mount --bind /var/tmp/kubelet/pod/hosts /etc/hosts",
    ]
    assert "mount -o remount,bind,ro /etc/butlers" in lines
    assert "mount -o remount,bind,ro /tmp" not in lines
    assert any(line.startswith("mount -t overlay") and line.endswith(" /etc") for line in lines)
    assert lines[-1] == 'exec "$@"'


def test_a_read_only_root_is_remounted_after_every_volume() -> None:
    lines = script([Mount("/var/tmp/kubelet/pod/volumes/tmp", "/tmp")], read_only=True)
    assert lines.index("mount -o remount,bind,ro /") > lines.index(
        "mount --bind /var/tmp/kubelet/pod/hosts /etc/hosts"
    )


def test_a_mount_that_would_hide_the_kubelets_own_files_is_refused() -> None:
    with pytest.raises(MountError, match="would hide the kubelet's pod directory"):
        script([Mount("/var/tmp/kubelet/pod/volumes/scratch", "/var/tmp")])


def test_host_paths_a_volume_hides_are_staged_first_and_bound_back() -> None:
    lines = build_mount_script(
        [Mount("/var/tmp/kubelet/pod/volumes/tmp", "/tmp"), Mount("/tmp/spans", "/tmp/spans")],
        hosts_file="/var/tmp/kubelet/pod/hosts",
        pod_root="/var/tmp/kubelet/pod",
        overlay_dir="/var/tmp/kubelet/pod/overlay/c",
        workdir="/tmp",
        keep=["/tmp/checkout/.venv", "/usr/lib/python3"],
        exists=exists,
    ).splitlines()
    stage = lines.index("mount --bind /tmp/spans /var/tmp/kubelet/pod/stage/1")
    image = lines.index("mount --bind /tmp/checkout/.venv /var/tmp/kubelet/pod/stage/2")
    cover = lines.index("mount --bind /var/tmp/kubelet/pod/volumes/tmp /tmp")
    assert stage < cover and image < cover
    assert lines.index("mount --bind /var/tmp/kubelet/pod/stage/1 /tmp/spans") > cover
    assert lines.index("mount -o remount,bind,ro /tmp/checkout/.venv") > cover
    # An image path no volume hides is left as it is.
    assert not any("/usr/lib/python3" in line for line in lines)


def test_a_file_volume_gets_a_file_mount_point() -> None:
    lines = script(
        [Mount("/var/tmp/kubelet/pod/volumes/cfg/app.conf", "/etc/app.conf", is_file=True)]
    )
    assert "[ -e /etc/app.conf ] || : > /etc/app.conf" in lines
