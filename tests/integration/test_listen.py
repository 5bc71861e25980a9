"""Listening on every address of both families: what the operator tells butlers (and the
chart the dashboard) to bind takes IPv4 and IPv6 connections, as IPv6-only and
dual-stack clusters need."""

from __future__ import annotations

import socket

import pytest

from butlers.db.embedded import free_port
from butlers.listen import listen_socket
from butlers_operator.render import build_butler_env
from butlers_operator.settings import OperatorSettings
from tests.unit.operator.test_render import _target


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_the_rendered_listen_address_takes_ipv4_and_ipv6() -> None:
    env = {e["name"]: e.get("value") for e in build_butler_env(_target(), OperatorSettings(), None)}
    port = free_port()
    server = listen_socket(env["BUTLERS_HOST"], port)
    try:
        for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_STREAM) as client:
                client.settimeout(5)
                client.connect((address, port))
        assert server.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.close()


def test_a_taken_port_is_an_error() -> None:
    port = free_port()
    first = listen_socket("::" if _ipv6_loopback() else "127.0.0.1", port)
    try:
        with pytest.raises(OSError):
            listen_socket("127.0.0.1", port)
    finally:
        first.close()
