"""Stopping the Lease's renewal when its loop has just closed (a lost Lease)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any, cast

from butlers_operator.__main__ import Leadership


def test_a_stop_after_the_renewing_loop_closed_joins_its_thread_and_says_what_was_lost() -> None:
    """A lost Lease ends the renewing task and its thread closes the loop; a stop that
    finds the thread still finishing must not fail on the closed loop (a race CI saw)."""
    leadership = Leadership(cast(Any, SimpleNamespace(lease_name="lease")), threading.Event())
    loop = asyncio.new_event_loop()
    task = loop.create_task(asyncio.sleep(0))
    loop.run_until_complete(task)
    loop.close()
    finishing = threading.Event()
    thread = threading.Thread(target=finishing.wait, args=(10,), daemon=True)
    thread.start()
    leadership._loop, leadership._task, leadership._thread = loop, task, thread
    leadership.lost = "the Lease is held by another replica"
    threading.Timer(0.2, finishing.set).start()
    assert leadership.stop() == "the Lease is held by another replica"
    assert not thread.is_alive()
