"""The smoke tests' expectations come from the roster: a new butler needs no test edit."""

from __future__ import annotations

from pathlib import Path

import yaml

from butlers.roster import load_roster
from tests.e2e.harness.roster_expect import domain_tables, expected_modules, module_tables


def _roster(tmp_path: Path, modules: dict[str, object]) -> list:
    manifest = {
        "apiVersion": "butlers.dev/v1alpha1",
        "kind": "Butler",
        "metadata": {"name": "newcomer"},
        "spec": {"description": "A butler added to the roster.", "port": 41000, "modules": modules},
    }
    (tmp_path / "newcomer.yaml").write_text(yaml.safe_dump(manifest))
    return load_roster(tmp_path)


def test_a_new_butlers_tables_come_from_its_modules_migrations(tmp_path: Path) -> None:
    [butler] = _roster(tmp_path, {"health": {}, "general": {}})
    tables = domain_tables(butler)
    assert {"measurements", "medications", "symptoms", "alembic_version_health"} <= tables
    assert {"notes", "collections", "alembic_version_general"} <= tables
    assert not tables & module_tables("contacts")


def test_module_status_follows_the_credentials_in_the_environment(tmp_path: Path) -> None:
    [butler] = _roster(
        tmp_path,
        {"messenger": {}, "telegram": {"tokenEnv": "T_TOKEN", "chatIdEnv": "T_CHAT"}},
    )
    # TELEGRAM_API_BASE: the module reads it when set (a self-hosted Bot API server).
    environ = {"T_TOKEN": "x", "T_CHAT": "y", "TELEGRAM_API_BASE": "http://127.0.0.1:1"}
    assert expected_modules(butler, environ) == {
        "messenger": ("active", None),
        "telegram": ("active", None),
    }
    assert expected_modules(butler, {"T_TOKEN": "", "T_CHAT": "y"})["telegram"] == (
        "failed",
        "credentials",
    )
