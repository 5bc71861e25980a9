"""One session at a time, in arrival order, with a way to step aside while waiting.

A session takes the baton before it runs and gives it back when it ends. A session
whose tool call waits for a person (an approval) steps aside (`give`), so the
butler's other sessions run meanwhile, and queues again (`take`) to continue. Every
operation names its session, so a late or repeated release never hands on a baton
its caller does not hold, and a session that ended can no longer take it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque

ENDED_KEPT = 4096  # ended sessions remembered, so a late `take` of one is refused


class SessionEnded(Exception):
    """The session ended while it was stepping aside."""


class Baton:
    def __init__(self) -> None:
        self._holder: str | None = None
        self._waiters: deque[tuple[str, asyncio.Future[None]]] = deque()
        self._ended: OrderedDict[str, None] = OrderedDict()

    @property
    def holder(self) -> str | None:
        return self._holder

    @property
    def busy(self) -> bool:
        return self._holder is not None

    @property
    def waiting(self) -> int:
        return sum(1 for _, future in self._waiters if not future.done())

    async def take(self, session: str) -> None:
        """Wait in line until `session` holds the baton; SessionEnded if it ended."""
        if session in self._ended:
            raise SessionEnded(session)
        if self._holder is None and not self._waiters:
            self._holder = session
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((session, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and self._holder == session:
                self._pass_on()  # handed over just as we were cancelled: hand it on
            raise

    def give(self, session: str) -> None:
        """Give the baton back if `session` holds it (a no-op otherwise)."""
        if self._holder == session:
            self._pass_on()

    def end(self, session: str) -> None:
        """`session` is over: release what it holds, drop it from the line."""
        self._ended[session] = None
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        for waiter, future in self._waiters:
            if waiter == session and not future.done():
                future.set_exception(SessionEnded(session))
        self.give(session)

    def _pass_on(self) -> None:
        self._holder = None
        while self._waiters:
            session, future = self._waiters.popleft()
            if not future.done():
                self._holder = session
                future.set_result(None)
                return
