"""Waiting for a condition with a deadline."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from butlers.waiting import WaitTimeout, process_exit, wait_until, wait_until_blocking


async def test_returns_the_first_truthy_value_of_an_async_condition() -> None:
    calls = iter([None, 0, {"ready": True}])

    async def check() -> object:
        return next(calls)

    assert await wait_until(check, timeout=5, interval=0.001) == {"ready": True}


async def test_sync_conditions_work_too() -> None:
    calls = iter([False, "done"])
    assert await wait_until(lambda: next(calls), timeout=5, interval=0.001) == "done"


async def test_times_out_with_the_message_after_one_last_check() -> None:
    checks: list[float] = []
    started = time.monotonic()

    def never() -> bool:
        checks.append(time.monotonic() - started)
        return False

    with pytest.raises(WaitTimeout, match="still not ready: 3"):
        await wait_until(never, timeout=0.2, interval=0.05, message=lambda: "still not ready: 3")
    assert checks[-1] >= 0.2 and len(checks) >= 4


async def test_errors_of_the_condition_end_the_wait_at_once() -> None:
    def broken() -> bool:
        raise RuntimeError("the process exited")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="exited"):
        await wait_until(broken, timeout=10)
    assert time.monotonic() - started < 1


async def test_the_caller_chooses_the_error() -> None:
    with pytest.raises(LookupError, match="gone"):
        await wait_until(lambda: None, timeout=0, message="gone", error=LookupError)


def test_blocking_variant_waits_and_times_out() -> None:
    calls = iter([None, 5])
    assert wait_until_blocking(lambda: next(calls), timeout=5, interval=0.001) == 5
    with pytest.raises(WaitTimeout):
        wait_until_blocking(lambda: False, timeout=0.05, interval=0.01)


@pytest.mark.parametrize("pidfd", [True, False])
async def test_process_exit_returns_when_another_process_ends(
    pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)  # the polling fallback
    sleeper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(30)"
    )
    try:
        waiting = asyncio.create_task(process_exit(sleeper.pid, interval=0.05))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        sleeper.kill()
        await sleeper.wait()
        await asyncio.wait_for(waiting, timeout=5)
    finally:
        if sleeper.returncode is None:
            sleeper.kill()
            await sleeper.wait()
    await asyncio.wait_for(process_exit(sleeper.pid), timeout=1)  # gone already
