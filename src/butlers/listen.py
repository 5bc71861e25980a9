"""Listening sockets of butlers and the dashboard, on any address family.

`::` (every address) listens on IPv6 and IPv4 at once (IPV6_V6ONLY off), so one setting
serves IPv4-only, dual-stack and IPv6-only clusters; where the kernel has IPv6 turned off
it falls back to `0.0.0.0`. Any other host is bound as given.
"""

from __future__ import annotations

import socket

ANY_ADDRESS = "::"


def listen_socket(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A non-blocking listening TCP socket with TCP_NODELAY (accepted sockets inherit it:
    without it every response waits ~40 ms on delayed ACKs). Raises OSError."""
    if host == ANY_ADDRESS:
        try:
            return _listen(socket.AF_INET6, ("::", port), backlog, dual_stack=True)
        except OSError as exc:
            if exc.errno not in _NO_IPV6:
                raise
            return _listen(socket.AF_INET, ("0.0.0.0", port), backlog)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return _listen(family, (host, port), backlog)


# IPv6 turned off in this kernel or network namespace.
_NO_IPV6 = {97, 99}  # EAFNOSUPPORT, EADDRNOTAVAIL


def _listen(
    family: socket.AddressFamily, address: tuple[str, int], backlog: int, dual_stack: bool = False
) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if dual_stack:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
