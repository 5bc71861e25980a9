"""`wait_until`: poll a condition (sync or async) until it is truthy, with a deadline."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

INTERVAL = 0.05


async def wait_until(
    condition: Callable[[], Any],
    *,
    timeout: float,
    message: str | Callable[[], str] = "condition not met",
) -> Any:
    """The first truthy value of `condition()`; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"after {timeout:g} s: {text}")
        await asyncio.sleep(INTERVAL)
