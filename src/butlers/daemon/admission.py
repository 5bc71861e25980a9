"""Which connections a butler keeps when too many are open: callers who proved who they
are come before strangers.

A connection is *pending* while it waits for request headers and has not yet presented
a valid token; it is *admitted* once a request on it passed the token check
(`AuthGate` calls `admit`). Pending connections are capped in total (`MAX_PENDING`)
and per peer address (`MAX_PENDING_PER_PEER`); past a cap the oldest pending one is
closed, since a client that means to call sends its headers within milliseconds of
connecting and is never the oldest. So sockets opened and left silent (or fed a byte
at a time) only ever push out each other, while admitted connections have their own
cap (`MAX_ADMITTED`, 503 past it). A pending connection also has a short deadline
for its headers (`http_limits.HEADER_TIMEOUT`), so a silent socket costs a file
descriptor for a few seconds: the caps are high (an attacker reopening every socket
closed for room would otherwise close young ones too), and shrink to fit the process's
file limit (`sized`; `raise_file_limit` lifts the soft limit to the hard one first).
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)
MAX_PENDING = 4096
MAX_PENDING_PER_PEER = 2048
MAX_ADMITTED = 1024
RESERVED_FILES = 256  # the pool, logs, outgoing clients, the fork server's pipes
WANTED_FILES = 65536
REPORT_EVERY = 10.0  # seconds between two log lines about closed pending connections


class Closable(Protocol):
    def close_pending(self) -> None: ...


def raise_file_limit(wanted: int = WANTED_FILES) -> int:
    """Lift the soft limit on open files towards the hard one; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return WANTED_FILES if soft == resource.RLIM_INFINITY else soft


class Admission:
    """The pending and admitted connections of one server."""

    @classmethod
    def sized(cls, files: int | None = None) -> Admission:
        """Caps that fit `files` open files (the soft limit when None)."""
        if files is None:
            files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            if files == resource.RLIM_INFINITY:
                files = WANTED_FILES
        budget = max(files - RESERVED_FILES, 64)
        admitted = min(MAX_ADMITTED, budget // 4)
        pending = min(MAX_PENDING, budget - admitted)
        return cls(pending, min(MAX_PENDING_PER_PEER, max(pending // 2, 1)), admitted)

    def __init__(
        self,
        max_pending: int = MAX_PENDING,
        max_pending_per_peer: int = MAX_PENDING_PER_PEER,
        max_admitted: int = MAX_ADMITTED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_pending = max_pending
        self.max_pending_per_peer = max_pending_per_peer
        self.max_admitted = max_admitted
        self._clock = clock
        # Insertion order is age: the first entry is the oldest.
        self._pending: dict[Closable, str] = {}
        self._by_peer: dict[str, dict[Closable, None]] = {}
        self._admitted: set[Closable] = set()
        self._closed = 0
        self._reported = 0.0

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def admitted(self) -> int:
        return len(self._admitted)

    def is_admitted(self, conn: Closable) -> bool:
        return conn in self._admitted

    def wait(self, conn: Closable, peer: str) -> None:
        """`conn` (not admitted) waits for request headers: count it, and close the
        oldest pending connection of its peer, or of all, past a cap."""
        if conn in self._admitted or conn in self._pending:
            return
        self._pending[conn] = peer
        mine = self._by_peer.setdefault(peer, {})
        mine[conn] = None
        if len(mine) > self.max_pending_per_peer:
            self._evict(next(iter(mine)), f"{self.max_pending_per_peer} from {peer}")
        if len(self._pending) > self.max_pending:
            self._evict(next(iter(self._pending)), f"{self.max_pending} in all")

    def working(self, conn: Closable) -> None:
        """`conn` delivered its headers: no longer pending (a request is under way)."""
        peer = self._pending.pop(conn, None)
        if peer is not None:
            mine = self._by_peer[peer]
            del mine[conn]
            if not mine:
                del self._by_peer[peer]

    def admit(self, conn: Closable) -> bool:
        """`conn` presented a valid token; False when admitted connections are at their cap."""
        if conn in self._admitted:
            return True
        self.working(conn)
        if len(self._admitted) >= self.max_admitted:
            return False
        self._admitted.add(conn)
        return True

    def gone(self, conn: Closable) -> None:
        self.working(conn)
        self._admitted.discard(conn)

    def _evict(self, conn: Closable, cap: str) -> None:
        self.working(conn)
        conn.close_pending()
        self._closed += 1
        now = self._clock()
        if now - self._reported >= REPORT_EVERY:
            log.warning(
                "closed %d connection(s) that presented no token and sent no request "
                "(at most %s may wait; %d connections with a valid token are open)",
                self._closed,
                cap,
                len(self._admitted),
            )
            self._closed = 0
            self._reported = now
