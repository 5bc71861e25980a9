"""Port checks against real loopback sockets."""

from __future__ import annotations

import socket
import sys

import pytest

from butlers.db.embedded import free_port, port_held_only_by_closing_connections, port_is_free

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net")


def test_listening_port_is_not_free_nor_closing() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert not port_is_free(port)
        assert not port_held_only_by_closing_connections(port)


def test_port_left_in_time_wait_by_a_client_is_reported_as_closing() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client_port = free_port()
        client = socket.socket()
        client.bind(("127.0.0.1", client_port))
        client.connect(server.getsockname())
        accepted, _ = server.accept()
        client.close()  # the side closing first keeps TIME_WAIT
        accepted.close()
    assert port_held_only_by_closing_connections(client_port)


def test_unused_port_is_free() -> None:
    port = free_port()
    assert port_is_free(port)
    assert not port_held_only_by_closing_connections(port)
