"""The process kubelet's image profiles: which local program an image stands for."""

from __future__ import annotations

import pytest

from tests.kube.images import ImageError, Images, build_argv, python_image_env


def test_the_project_images_are_known_in_any_registry_and_tag() -> None:
    images = Images()
    for image in ("ghcr.io/butlers-dev/butler:0.1.0", "registry.local:5000/me/butler", "butler"):
        assert images.find(image).entrypoint == ("butlers",)
    assert images.find("ghcr.io/butlers-dev/operator:0.1.0").entrypoint == (
        "python",
        "-m",
        "butlers_operator",
    )


def test_an_unknown_image_is_an_error_naming_it() -> None:
    with pytest.raises(ImageError, match="quay.io/other/thing:1"):
        Images().find("quay.io/other/thing:1")


def test_command_replaces_the_entrypoint_and_args_the_cmd() -> None:
    profile = Images().find("ghcr.io/butlers-dev/butler:0.1.0")
    assert build_argv({}, profile) == ["butlers", "serve", "--spec", "/etc/butlers/butler.yaml"]
    assert build_argv({"args": ["migrate"]}, profile) == ["butlers", "migrate"]
    assert build_argv({"command": ["sh"], "args": ["-c", "x"]}, profile) == ["sh", "-c", "x"]


def test_each_image_is_told_where_its_remapped_ports_are() -> None:
    images = Images()
    assert images.find("x/butler:1").listen_env({"mcp": 21000, 40103: 21000}) == {
        "BUTLERS_HOST": "127.0.0.1",
        "BUTLERS_PORT": "21000",
    }
    assert images.find("x/operator:1").listen_env({"health": 21001, 8080: 21001}) == {
        "BUTLERS_OPERATOR_LIVENESS_ENDPOINT": "http://127.0.0.1:21001/healthz"
    }
    assert images.find("python:3.11").listen_env({8080: 21002, "http": 21002}) == {"PORT": "21002"}


def test_python_images_run_the_code_the_tests_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worktree sharing another checkout's venv: its pods import the worktree's code."""
    monkeypatch.setenv("PYTHONPATH", "/work/tree/src")
    assert python_image_env()["PYTHONPATH"] == "/work/tree/src"
    monkeypatch.delenv("PYTHONPATH")
    assert "PYTHONPATH" not in python_image_env()
