"""The messenger's owner destinations come from the switchboard's owner list (the one
place the owner is configured); its own list is for a messenger without one."""

from __future__ import annotations

from typing import Any

from butlers.mcp_clients import EndpointUnavailable
from butlers.modules.messenger.outbound import normalize
from butlers.modules.messenger.owners import OwnerBook

BOARD = {"telegram": ["5550001"], "email": ["Owner@Example.org"]}


def _fetch(answer: Any) -> Any:
    calls = []

    async def fetch() -> Any:
        calls.append(1)
        if isinstance(answer, Exception):
            raise answer
        return answer

    fetch.calls = calls  # type: ignore[attr-defined]
    return fetch


async def test_the_switchboards_owner_list_is_the_messengers() -> None:
    book = OwnerBook({}, _fetch(BOARD), normalize)
    assert await book.destinations("telegram") == ({"5550001"}, None)
    assert await book.destinations("email") == ({"owner@example.org"}, None)


async def test_the_list_is_read_once_a_minute_not_per_send() -> None:
    fetch = _fetch(BOARD)
    book = OwnerBook({}, fetch, normalize)
    for _ in range(5):
        await book.destinations("telegram")
    assert len(fetch.calls) == 1


async def test_a_messenger_without_a_switchboard_uses_its_own_list() -> None:
    book = OwnerBook({"telegram": {"42"}}, None, normalize)
    assert await book.destinations("telegram") == ({"42"}, None)


async def test_an_agreeing_second_list_is_accepted() -> None:
    book = OwnerBook({"email": {"owner@example.org"}}, _fetch(BOARD), normalize)
    assert await book.destinations("email") == ({"owner@example.org"}, None)


async def test_two_lists_that_disagree_trust_nobody_and_say_which_fields() -> None:
    book = OwnerBook({"telegram": {"666"}}, _fetch(BOARD), normalize)
    owners, problem = await book.destinations("telegram")
    assert owners == set()
    assert problem is not None
    assert "spec.modules.messenger.owner.telegram ['666']" in problem
    assert "spec.modules.switchboard.owner.telegram ['5550001']" in problem


async def test_an_unreachable_switchboard_trusts_nobody_and_says_why() -> None:
    book = OwnerBook({}, _fetch(EndpointUnavailable("connection refused")), normalize)
    owners, problem = await book.destinations("telegram")
    assert owners == set() and problem is not None and "connection refused" in problem
