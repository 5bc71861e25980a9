"""Waiting for a condition with a deadline: the one polling loop of the code base.

`wait_until` (async) and `wait_until_blocking` (for synchronous callers) call
`condition` until it returns something truthy, and return that value; after
`timeout` seconds they make one last check, then raise `error(message)`. The
condition decides what counts as "not yet" (return a falsy value); any exception
it raises ends the wait at once. Sleeps never overrun the deadline.

`process_exit` waits, without a deadline, for another process (not necessarily our
parent) to end: the one lifeline of processes that must not outlive their supervisor.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")
DEFAULT_INTERVAL = 0.05


class WaitTimeout(TimeoutError):
    """A condition did not come true before its deadline."""


Message = str | Callable[[], str]


def _message(message: Message) -> str:
    return message() if callable(message) else message


@overload
async def wait_until(
    condition: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,
    interval: float = ...,
    message: Message = ...,
    error: Callable[[str], BaseException] = ...,
) -> T: ...


@overload
async def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = ...,
    message: Message = ...,
    error: Callable[[str], BaseException] = ...,
) -> T: ...


async def wait_until(
    condition: Callable[[], Any],
    *,
    timeout: float,
    interval: float = DEFAULT_INTERVAL,
    message: Message = "condition not met",
    error: Callable[[str], BaseException] = WaitTimeout,
) -> Any:
    """The first truthy value of `condition()` (sync or async) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise error(_message(message))
        await asyncio.sleep(min(interval, remaining))


def wait_until_blocking(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = DEFAULT_INTERVAL,
    message: Message = "condition not met",
    error: Callable[[str], BaseException] = WaitTimeout,
) -> T:
    """`wait_until` for synchronous code: blocks the calling thread between checks."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise error(_message(message))
        time.sleep(min(interval, remaining))


async def process_exit(pid: int, *, interval: float = 1.0) -> None:
    """Return once process `pid` has ended (at once if it is gone already).

    Linux: woken by a pidfd, which also survives the pid being reused. Elsewhere, or
    where pidfds are refused, polls `kill(pid, 0)` every `interval` seconds.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        while process_alive(pid):  # noqa: ASYNC110 (no pidfd: polling is the only way to learn it)
            await asyncio.sleep(interval)
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    try:
        loop.add_reader(fd, readable)
        await ended
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists (a zombie child of ours is reaped, and is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # somebody else's process by now, or ours under another uid
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # a zombie still answers kill(0)
        return done == 0
    except ChildProcessError:
        return True  # not our child: kill(0) said it exists
