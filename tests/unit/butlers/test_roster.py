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


def _owned(tmp_path: Path, board: dict[str, object], own: dict[str, object]) -> Path:
    for name, port, modules in (
        ("switchboard", 40100, {"switchboard": {"owner": board}}),
        ("messenger", 40104, {"messenger": {"owner": own}}),
    ):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(_document(name, port, modules)))
    return tmp_path


def test_a_messenger_owner_that_disagrees_with_the_switchboards_is_refused_at_load(
    tmp_path: Path,
) -> None:
    _owned(tmp_path, {"telegram": [5550001], "email": []}, {"telegram": ["5550002"]})
    with pytest.raises(RosterError) as caught:
        load_roster(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'messenger.yaml'}: spec.modules.messenger.owner.telegram ['5550002'] "
        "disagrees with spec.modules.switchboard.owner.telegram ['5550001'] "
        f"(in {tmp_path / 'switchboard.yaml'}): configure the owner once, in "
        "spec.modules.switchboard.owner (the messenger reads it from there), and remove "
        "spec.modules.messenger.owner"
    )


def test_a_messenger_owner_saying_the_same_as_the_switchboards_loads(tmp_path: Path) -> None:
    board = {"telegram": [5550001], "email": ["Owner@Example.org"]}
    own = {"telegram": ["5550001"], "email": ["Me <owner@example.ORG>"]}
    assert len(load_roster(_owned(tmp_path, board, own))) == 2
    # A channel the messenger leaves empty takes the switchboard's.
    assert len(load_roster(_owned(tmp_path, board, {"email": ["owner@example.org"]}))) == 2
    with pytest.raises(RosterError, match=r"owner\.email \['other@example\.org'\] disagrees"):
        load_roster(_owned(tmp_path, board, {"email": ["other@example.org"]}))
