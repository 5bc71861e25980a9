from __future__ import annotations

from pathlib import Path

import pytest

from butlers.errors import ButlersError
from butlers.settings import ButlerSettings, EcosystemSettings


def test_ecosystem_defaults_to_dot_butlers_and_roster() -> None:
    settings = EcosystemSettings.from_env({})
    assert settings.data_dir == Path(".butlers").absolute()
    assert settings.roster_dir == Path("roster").absolute()
    assert settings.database_url is None


def test_database_url_comes_from_the_environment() -> None:
    settings = EcosystemSettings.from_env({"BUTLERS_DATABASE_URL": "postgresql://u:p@db/x"})
    assert settings.database_url == "postgresql://u:p@db/x"


def test_butler_settings_need_a_dsn() -> None:
    with pytest.raises(ButlersError, match="BUTLERS_DSN"):
        ButlerSettings.from_env({}, spec_path=Path("x.yaml"))


def test_butler_port_must_be_a_number() -> None:
    env = {"BUTLERS_DSN": "postgresql://x", "BUTLERS_PORT": "eighty"}
    with pytest.raises(ButlersError, match="BUTLERS_PORT='eighty'"):
        ButlerSettings.from_env(env, spec_path=Path("x.yaml"))


def test_butler_settings_read_schema_host_and_port() -> None:
    env = {
        "BUTLERS_DSN": "postgresql://x",
        "BUTLERS_PORT": "4000",
        "BUTLERS_SCHEMA": "s",
        "BUTLERS_HOST": "0.0.0.0",
    }
    settings = ButlerSettings.from_env(env, spec_path=Path("x.yaml"))
    assert (settings.port, settings.schema, settings.host) == (4000, "s", "0.0.0.0")


def test_butler_prices_come_from_the_environment() -> None:
    env = {
        "BUTLERS_DSN": "postgresql://x",
        "BUTLERS_PRICES": '{"llama3.1": {"input_per_mtok": 0.5, "output_per_mtok": 1}}',
    }
    settings = ButlerSettings.from_env(env, spec_path=Path("x.yaml"))
    assert settings.prices == {"llama3.1": (0.5, 1.0, None, None)}
    cached = '{"m": {"input_per_mtok": 3, "output_per_mtok": 15, "cache_read_per_mtok": 0.3}}'
    settings = ButlerSettings.from_env(env | {"BUTLERS_PRICES": cached}, spec_path=Path("x"))
    assert settings.prices == {"m": (3.0, 15.0, 0.3, None)}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("{not json", "BUTLERS_PRICES is not JSON"),
        ('["llama"]', "JSON object"),
        ('{"m": {"input_per_mtok": 1}}', r"BUTLERS_PRICES\['m'\] must be an object"),
        ('{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}', r"\['m'\]\.input_per_mtok=-1"),
        ('{"m": {"input_per_mtok": 1, "output_per_mtok": "2"}}', r"output_per_mtok='2'"),
        ('{"m": {"input_per_mtok": 1, "output_per_mtok": 2, "cache": 1}}', "optionally"),
        (
            '{"m": {"input_per_mtok": 1, "output_per_mtok": 2, "cache_read_per_mtok": -1}}',
            r"cache_read_per_mtok=-1",
        ),
    ],
)
def test_bad_prices_name_the_model_and_field(text: str, names: str) -> None:
    env = {"BUTLERS_DSN": "postgresql://x", "BUTLERS_PRICES": text}
    with pytest.raises(ButlersError, match=names):
        ButlerSettings.from_env(env, spec_path=Path("x.yaml"))


def test_butler_pool_sizes_come_from_the_environment() -> None:
    env = {"BUTLERS_DSN": "postgresql://x"}
    assert ButlerSettings.from_env(env, spec_path=Path("x.yaml")).pool_sizes == (1, 10)
    sized = env | {"BUTLERS_POOL_MIN_SIZE": "2", "BUTLERS_POOL_MAX_SIZE": "4"}
    assert ButlerSettings.from_env(sized, spec_path=Path("x.yaml")).pool_sizes == (2, 4)
    large = env | {"BUTLERS_POOL_MIN_SIZE": "12"}
    assert ButlerSettings.from_env(large, spec_path=Path("x.yaml")).pool_sizes == (12, 12)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"BUTLERS_POOL_MAX_SIZE": "0"}, "BUTLERS_POOL_MAX_SIZE='0' must be positive"),
        ({"BUTLERS_POOL_MIN_SIZE": "many"}, "BUTLERS_POOL_MIN_SIZE='many' is not a whole"),
        ({"BUTLERS_POOL_MIN_SIZE": "5", "BUTLERS_POOL_MAX_SIZE": "2"}, "MIN_SIZE=5 is more"),
    ],
)
def test_bad_pool_sizes_name_the_variable(values: dict[str, str], match: str) -> None:
    env = {"BUTLERS_DSN": "postgresql://x", **values}
    with pytest.raises(ButlersError, match=match):
        ButlerSettings.from_env(env, spec_path=Path("x.yaml"))


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, True), ("", True), ("1", True), ("true", True), ("0", False), ("no", False)],
)
def test_the_mcp_fast_path_is_on_unless_turned_off(value: str | None, on: bool) -> None:
    env = {"BUTLERS_DSN": "x"} | ({"BUTLERS_MCP_FAST_PATH": value} if value is not None else {})
    assert ButlerSettings.from_env(env, spec_path=Path("s.yaml")).mcp_fast_path is on
