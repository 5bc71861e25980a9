"""The roster's switchboard is found by its module, never by its name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from butlers.errors import RosterError
from butlers.roster import find_switchboard, load_roster, parse_butler


def _document(name: str, port: int, modules: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "butlers.dev/v1alpha1",
        "kind": "Butler",
        "metadata": {"name": name},
        "spec": {"description": name, "port": port, "modules": modules},
    }


def test_the_switchboard_is_the_butler_with_the_switchboard_module() -> None:
    router = parse_butler(_document("router", 40100, {"switchboard": {}}), "router.yaml")
    named = parse_butler(_document("switchboard", 40101, {"general": {}}), "switchboard.yaml")
    assert find_switchboard([named, router]) is router
    assert find_switchboard([named]) is None


def test_two_switchboards_in_one_roster_are_refused(tmp_path: Path) -> None:
    for name, port in (("a", 40100), ("b", 40101)):
        document = _document(name, port, {"switchboard": {}})
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(RosterError, match=r"b\.yaml: spec\.modules\.switchboard: only one"):
        load_roster(tmp_path)
