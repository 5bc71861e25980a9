"""A rendered Deployment becomes a local process launch the e2e backend can start."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from butlers.db.provision import Credentials
from butlers.roster import load_butler_file, parse_butler
from butlers_operator import render
from butlers_operator.settings import OperatorSettings
from tests.e2e.harness import localrun

ROOT = Path(__file__).resolve().parents[3]
DSN = "postgresql://health:pw@127.0.0.1:5432/butlers"


@pytest.fixture
def rendered() -> dict[str, dict]:
    spec = load_butler_file(ROOT / "roster" / "health.yaml").spec
    target = render.ButlerTarget(name="health", namespace="home", uid="u", spec=spec)
    objects = render.render_all(
        target, OperatorSettings(), Credentials("health", "health", "pw"), DSN, 5432
    )
    return {o["kind"]: o for o in objects}


def _launch(rendered: dict[str, dict], container: str = "butler") -> localrun.ContainerLaunch:
    return localrun.build_container_launch(
        rendered["Deployment"],
        {rendered["Secret"]["metadata"]["name"]: rendered["Secret"]},
        {rendered["ConfigMap"]["metadata"]["name"]: rendered["ConfigMap"]},
        container,
    )


def test_butler_container_runs_butlers_serve_with_its_database(rendered) -> None:  # type: ignore[no-untyped-def]
    launch = _launch(rendered)
    assert launch.argv == ["butlers", "serve", "--spec", "/etc/butlers/butler.yaml"]
    assert launch.env["BUTLERS_DSN"] == DSN
    assert launch.env["BUTLERS_SCHEMA"] == "health"
    assert launch.env["BUTLERS_PORT"] == "40103"


def test_the_spec_file_is_materialized_where_the_container_reads_it(rendered) -> None:  # type: ignore[no-untyped-def]
    files = _launch(rendered).files
    assert list(files) == ["/etc/butlers/butler.yaml"]
    assert parse_butler(yaml.safe_load(files["/etc/butlers/butler.yaml"]), "f").name == "health"


def test_relocate_moves_files_and_rewrites_argv(rendered, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    launch = _launch(rendered).relocate(str(tmp_path))
    spec_file = f"{tmp_path}/etc/butlers/butler.yaml"
    assert launch.argv[-1] == spec_file and spec_file in launch.files


def test_pod_launches_run_migrations_before_the_butler(rendered) -> None:  # type: ignore[no-untyped-def]
    launches = localrun.build_pod_launches(
        rendered["Deployment"],
        {"health-db": rendered["Secret"]},
        {"health-spec": rendered["ConfigMap"]},
    )
    assert [launch.name for launch in launches] == ["migrate", "butler"]
    assert launches[0].argv[:2] == ["butlers", "migrate"]


def test_a_missing_secret_is_a_clear_error(rendered) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(localrun.LaunchError, match="Secret 'health-db'"):
        localrun.build_container_launch(
            rendered["Deployment"], {}, {"health-spec": rendered["ConfigMap"]}
        )


def test_optional_env_from_secret_may_be_absent_and_string_data_is_read() -> None:
    container = {
        "envFrom": [{"secretRef": {"name": "llm", "optional": True}}],
        "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}},
        ],
    }
    secrets = {"s": {"kind": "Secret", "stringData": {"k": "plain"}}}
    maps = {"m": {"kind": "ConfigMap", "data": {"k": "mapped"}}}
    assert localrun.build_env(container, secrets, maps) == {"A": "1", "B": "plain", "C": "mapped"}
