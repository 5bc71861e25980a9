"""Connections without a token push out only each other; those with one have their own cap."""

from __future__ import annotations

from butlers.daemon.admission import Admission


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close_pending(self) -> None:
        self.closed = True


def test_past_the_per_peer_cap_the_oldest_pending_connection_of_that_peer_is_closed() -> None:
    book = Admission(max_pending=10, max_pending_per_peer=3, max_admitted=5)
    other = Conn("other")
    book.wait(other, "10.0.0.2")
    mine = [Conn(f"a{i}") for i in range(5)]
    for conn in mine:
        book.wait(conn, "10.0.0.1")
    assert [c.closed for c in mine] == [True, True, False, False, False]
    assert not other.closed and book.pending == 4


def test_past_the_total_cap_the_oldest_pending_connection_is_closed() -> None:
    book = Admission(max_pending=3, max_pending_per_peer=3, max_admitted=5)
    conns = [Conn(str(i)) for i in range(4)]
    for index, conn in enumerate(conns):
        book.wait(conn, f"10.0.0.{index}")
    assert [c.closed for c in conns] == [True, False, False, False]


def test_a_connection_at_work_or_admitted_is_never_closed_for_room() -> None:
    book = Admission(max_pending=2, max_pending_per_peer=2, max_admitted=1)
    caller, busy = Conn("caller"), Conn("busy")
    book.wait(caller, "p")
    book.wait(busy, "p")
    assert book.admit(caller)
    book.working(busy)  # its headers arrived: a request is under way
    strangers = [Conn(f"s{i}") for i in range(6)]
    for conn in strangers:
        book.wait(conn, "p")
    assert not caller.closed and not busy.closed
    assert book.pending == 2 and book.admitted == 1
    late = Conn("late")
    book.wait(late, "p")
    assert not book.admit(late)  # admitted connections are at their cap: 503
    book.gone(caller)
    assert book.admit(late)


def test_the_caps_fit_the_file_limit() -> None:
    small = Admission.sized(1024)
    assert small.max_admitted + small.max_pending <= 1024 - 256
    assert 0 < small.max_pending_per_peer < small.max_pending
    large = Admission.sized(1_000_000)
    assert (large.max_pending, large.max_pending_per_peer, large.max_admitted) == (4096, 2048, 1024)
