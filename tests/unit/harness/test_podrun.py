"""A rendered pod's containers as `docker run` flags, without Docker."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from butlers.db.provision import Credentials
from butlers.spec import ButlerSpec
from butlers_operator import render
from butlers_operator.settings import OperatorSettings
from tests.e2e.harness.localrun import ContainerLaunch, build_pod_launches
from tests.support.podrun import PodSpecError, build_docker_run, build_env_file, parse_quantity

CREDENTIALS = Credentials(schema="health", role="health", password="pw")


def rendered() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    target = render.ButlerTarget(
        name="health", namespace="ns", uid="u1", spec=ButlerSpec(description="d", port=41000)
    )
    settings = OperatorSettings(namespaces=("ns",), butler_image="registry/butler:1")
    objects = render.render_all(target, settings, CREDENTIALS, "postgresql://h:pw@db/x", 5432)
    by_kind = {o["kind"]: o for o in objects}
    return (
        by_kind["Deployment"],
        {"health-db": by_kind["Secret"]},
        {"health-spec": by_kind["ConfigMap"]},
    )


def run_argv(container: str, deployment: dict[str, Any] | None = None) -> list[str]:
    rendered_deployment, secrets, maps = rendered()
    deployment = deployment or rendered_deployment
    launch = next(x for x in build_pod_launches(deployment, secrets, maps) if x.name == container)
    return build_docker_run(
        deployment, launch, image="img", name="n", env_file="/w/n.env", files_root="/w/n"
    )


def flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


@pytest.mark.parametrize("container", ["migrate", "butler"])
def test_the_pod_security_context_becomes_docker_flags(container: str) -> None:
    argv = run_argv(container)
    assert flag_values(argv, "--user") == [f"{render.RUN_AS}:{render.RUN_AS}"]
    assert flag_values(argv, "--group-add") == [str(render.RUN_AS)]
    assert "--read-only" in argv
    assert flag_values(argv, "--cap-drop") == ["ALL"]
    assert flag_values(argv, "--security-opt") == ["no-new-privileges"]


def test_empty_dir_is_a_tmpfs_of_its_size_and_config_maps_are_read_only_files() -> None:
    argv = run_argv("butler")
    assert flag_values(argv, "--tmpfs") == ["/tmp:rw,nosuid,nodev,mode=1777,size=67108864"]
    assert flag_values(argv, "--mount") == [
        "type=bind,source=/w/n/etc/butlers,target=/etc/butlers,readonly"
    ]
    assert flag_values(argv, "--memory") == [str(512 * 2**20)]


def test_the_rendered_command_replaces_the_entrypoint() -> None:
    argv = run_argv("butler")
    image = argv.index("img")
    assert argv[image - 2 : image] == ["--entrypoint", "butlers"]
    assert argv[image + 1 :] == ["serve", "--spec", render.SPEC_PATH]
    assert flag_values(argv, "--network") == ["host"]
    assert flag_values(argv, "--env-file") == ["/w/n.env"]


def test_a_non_root_pod_without_a_user_is_refused() -> None:
    deployment = copy.deepcopy(rendered()[0])
    del deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    with pytest.raises(PodSpecError, match="runAsNonRoot"):
        run_argv("butler", deployment)


def test_a_volume_kind_it_cannot_run_is_refused() -> None:
    deployment = copy.deepcopy(rendered()[0])
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    volumes[1] = {"name": volumes[1]["name"], "hostPath": {"path": "/var"}}
    with pytest.raises(PodSpecError, match=f"'{volumes[1]['name']}'"):
        run_argv("butler", deployment)


def test_the_environment_goes_to_a_file_and_a_newline_is_refused() -> None:
    launch = ContainerLaunch("butler", ["butlers"], {"B": "2", "A": "x=1"})
    assert build_env_file(launch) == "A=x=1\nB=2\n"
    with pytest.raises(PodSpecError, match="BAD"):
        build_env_file(ContainerLaunch("butler", ["butlers"], {"BAD": "a\nb"}))


@pytest.mark.parametrize(
    ("quantity", "size"), [("64Mi", 64 * 2**20), ("1G", 10**9), ("512", 512), ("1.5Ki", 1536)]
)
def test_quantities(quantity: str, size: int) -> None:
    assert parse_quantity(quantity) == size
