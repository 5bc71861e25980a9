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
