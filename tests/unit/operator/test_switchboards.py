"""The switchboard index: one list per namespace, then kept by watch events."""

from __future__ import annotations

from typing import Any

from butlers_operator.switchboards import SwitchboardIndex

ROUTER = "http://router.home.svc:40200/mcp"


def _butler(name: str, switchboard: bool = False, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"description": name, "port": 40200 if switchboard else 40100}
    if switchboard:
        spec["modules"] = {"switchboard": {}}
    return {"metadata": {"name": name, "namespace": "home", **meta}, "spec": spec}


class FakeKube:
    def __init__(self, butlers: list[dict[str, Any]]) -> None:
        self.butlers = butlers
        self.lists = 0

    async def list(self, path: str) -> list[dict[str, Any]]:
        self.lists += 1
        return list(self.butlers)


async def test_a_namespace_is_listed_once_then_kept_by_events() -> None:
    kube = FakeKube([_butler("general"), _butler("router", switchboard=True)])
    index = SwitchboardIndex(kube)  # type: ignore[arg-type]
    assert await index.find("home") == ("router", ROUTER)
    index.observe(_butler("router", deletionTimestamp="2026-01-01T00:00:00Z"))
    assert await index.find("home") is None
    index.observe(_butler("router", switchboard=True))
    assert await index.find("home") == ("router", ROUTER)
    index.observe(_butler("router", switchboard=True), gone=True)
    assert await index.find("home") is None
    assert kube.lists == 1


async def test_an_event_newer_than_a_list_wins_over_it() -> None:
    index = SwitchboardIndex(FakeKube([]))  # type: ignore[arg-type]
    since = index.tick()  # a list is asked for here...
    index.observe(_butler("router", switchboard=True))  # ...an event arrives meanwhile...
    index.replace("home", [], since)  # ...and the list (older) does not show it
    assert index.current("home") == ("router", ROUTER)
    # A later list that does not show it any more removes it.
    index.replace("home", [], index.tick())
    assert index.current("home") is None


def test_the_first_switchboard_by_name_is_the_one() -> None:
    index = SwitchboardIndex(FakeKube([]))  # type: ignore[arg-type]
    index.replace("home", [_butler("zeta", True), _butler("alpha", True)], index.tick())
    assert index.current("home") == ("alpha", "http://alpha.home.svc:40200/mcp")
