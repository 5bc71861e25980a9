"""Which switchboard the butlers of a namespace register with."""

from __future__ import annotations

from typing import Any

from butlers_operator.reconcile import find_switchboard_url


def _butler(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "home"},
        "spec": {"description": name, "port": 40100, **spec},
    }


def test_the_butler_with_the_switchboard_module_is_the_switchboard() -> None:
    butlers = [_butler("general"), _butler("router", port=40200, modules={"switchboard": {}})]
    assert find_switchboard_url(butlers) == "http://router.home.svc:40200/mcp"


def test_without_a_switchboard_module_nobody_registers() -> None:
    assert find_switchboard_url([_butler("switchboard"), _butler("general")]) is None


def test_an_invalid_switchboard_spec_is_skipped() -> None:
    butlers = [
        _butler("a-broken", port="not a port", modules={"switchboard": {}}),
        _butler("b-good", modules={"switchboard": {}}),
    ]
    assert find_switchboard_url(butlers) == "http://b-good.home.svc:40100/mcp"
