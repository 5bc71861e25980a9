"""Delivering due reminders to the owner, once, through the messenger.

`OwnerLine` is how this butler reaches its owner: the messenger's `notify` when this
butler runs the messenger module, else the switchboard's `owner_notify` (in this
process on the switchboard itself, over MCP with this butler's own token elsewhere),
which hands the message to the messenger's `notify` with no recipient: the owner's
default channel. Nothing here can address anyone else.

`DeliveryLoop` sleeps until the next attempt is due (woken at once by a new
reminder, at most `MAX_SLEEP` otherwise), claims due rows under a lease, sends, and
records each attempt with the messenger's delivery id. An occurrence that fell due
while this butler was not running is sent at start, marked late; a recurring
reminder's missed occurrences collapse into that one late delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from fastmcp import FastMCP

from butlers.auth.identity import LOCAL, current_identity
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed
from butlers.modules.reminders.store import Reminder, ReminderStore
from butlers.modules.reminders.timing import next_occurrence

log = logging.getLogger(__name__)
MAX_SLEEP = 30.0  # a reminder written by another process is seen within this
SEND_TIMEOUT = 60.0
MAX_ATTEMPTS = 8  # per occurrence: about 40 minutes of back-off in all
LATE_AFTER = timedelta(seconds=60)
GATHER_TIMEOUT = 60.0


def backoff(attempt: int) -> timedelta:
    """The pause before attempt `attempt + 1`: 5 s doubling, at most 15 minutes."""
    return timedelta(seconds=min(5 * 2 ** (attempt - 1), 900))


class GatherFailed(Exception):
    pass


@dataclass(frozen=True)
class Sent:
    delivery_id: str | None
    error: str | None  # None: the messenger reports it sent


def _data(result: Any) -> Any:
    """A FastMCP tool result's value (FastMCP wraps non-object results in `result`)."""
    data = getattr(result, "structured_content", None)
    if isinstance(data, dict) and set(data) == {"result"}:
        return data["result"]
    return data


def _outcome(data: Any) -> Sent:
    if not isinstance(data, dict):
        return Sent(None, f"the messenger answered {data!r}")
    delivery_id = None if data.get("id") is None else str(data["id"])
    if data.get("status") == "sent":
        return Sent(delivery_id, None)
    return Sent(delivery_id, str(data.get("error") or f"delivery {data.get('status')}"))


class OwnerLine:
    def __init__(
        self,
        mcp: FastMCP,
        *,
        butler: str,
        local_tools: set[str],
        switchboard_url: str | None,
        token: str | None,
    ) -> None:
        self._mcp = mcp
        self._butler = butler
        self.use_local(local_tools)
        self._switchboard = switchboard_url
        self._client = McpClient(
            {"Authorization": f"Bearer {token}"} if token else None,
            timeout=SEND_TIMEOUT,
            client_name=f"butler {butler} reminders",
        )

    def use_local(self, local_tools: set[str]) -> None:
        """Which of the butler's own tools carry the line (again when modules change)."""
        self._local: str | None = "notify" if "notify" in local_tools else None
        if self._local is None and "owner_notify" in local_tools:
            self._local = "owner_notify"
        self._gather_here = "briefing_gather" in local_tools

    @property
    def route(self) -> str:
        if self._local == "notify":
            return "the messenger module of this butler"
        if self._local == "owner_notify":
            return "this switchboard's owner_notify"
        return f"the switchboard at {self._switchboard}" if self._switchboard else "nowhere"

    async def send(self, message: str, channel: str | None) -> Sent:
        arguments: dict[str, Any] = {"message": message}
        if channel:
            arguments["channel"] = channel
        if self._local is not None:
            if self._local == "owner_notify":
                arguments["butler"] = self._butler
            token = current_identity.set(LOCAL)
            try:
                result = await self._mcp.call_tool(self._local, arguments)
            except Exception as exc:
                return Sent(None, f"{self._local} failed: {exc}")
            finally:
                current_identity.reset(token)
            return _outcome(_data(result))
        if self._switchboard is None:
            return Sent(
                None,
                "this butler runs no messenger and knows no switchboard to reach one "
                "(BUTLERS_SWITCHBOARD_URL)",
            )
        try:
            answer = await self._client.call_tool(
                self._switchboard, "owner_notify", arguments | {"butler": self._butler}
            )
        except (EndpointUnavailable, OSError, TimeoutError) as exc:
            return Sent(None, f"the switchboard could not be reached: {exc}")
        except (ToolFailed, McpError) as exc:
            return Sent(None, f"the switchboard refused: {exc}")
        return _outcome(answer.data)

    async def gather(self, day: date) -> list[dict[str, Any]] | None:
        """Every registered butler's briefing sections for `day` (the switchboard's
        `briefing_gather`); None when this butler knows no switchboard. Raises
        `GatherFailed` when the switchboard cannot answer."""
        arguments = {"butler": self._butler, "day": day.isoformat()}
        if self._gather_here:
            token = current_identity.set(LOCAL)
            try:
                data = _data(await self._mcp.call_tool("briefing_gather", arguments))
            except Exception as exc:
                raise GatherFailed(str(exc)) from None
            finally:
                current_identity.reset(token)
        elif self._switchboard is None:
            return None
        else:
            try:
                answer = await self._client.call_tool(
                    self._switchboard, "briefing_gather", arguments, timeout=GATHER_TIMEOUT
                )
            except (EndpointUnavailable, OSError, TimeoutError, ToolFailed, McpError) as exc:
                raise GatherFailed(f"the switchboard could not gather sections: {exc}") from None
            data = answer.data
        return [a for a in data if isinstance(a, dict)] if isinstance(data, list) else []

    async def aclose(self) -> None:
        await self._client.aclose()


def compose(reminder: Reminder, late: bool) -> str:
    if not late or reminder.next_due_at is None:
        return f"Reminder: {reminder.text}"
    due = reminder.next_due_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"Reminder (late: it was due at {due}): {reminder.text}"


class DeliveryLoop:
    def __init__(self, store: ReminderStore, line: OwnerLine, butler: str) -> None:
        self._store = store
        self._line = line
        self._butler = butler
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._started_at = datetime.now(UTC)

    def wake(self) -> None:
        """Look again now (a reminder was created or changed)."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._started_at = datetime.now(UTC)
            self._task = asyncio.create_task(self._run(), name=f"reminders {self._butler}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._line.aclose()

    async def _run(self) -> None:
        current_identity.set(LOCAL)
        while True:
            self._wake.clear()
            pause = 5.0
            try:
                await self.deliver_due()
                upcoming = await self._store.next_attempt_at()
                pause = MAX_SLEEP
                if upcoming is not None:
                    pause = (upcoming - datetime.now(UTC)).total_seconds()
                    pause = min(MAX_SLEEP, max(0.0, pause))
            except Exception as exc:  # the database may be down: look again soon
                log.warning("reminder delivery failed: %s: %s", exc.__class__.__name__, exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._wake.wait()

    async def deliver_due(self) -> int:
        """Send every claimed due reminder; returns how many were attempted."""
        attempted = 0
        while claimed := await self._store.claim_due():
            await asyncio.gather(*(self._deliver(r) for r in claimed))
            attempted += len(claimed)
        return attempted

    async def _deliver(self, reminder: Reminder) -> None:
        due = reminder.next_due_at
        assert due is not None
        now = datetime.now(UTC)
        late = due < self._started_at or now - due > LATE_AFTER
        try:
            async with asyncio.timeout(SEND_TIMEOUT + 5):
                sent = await self._line.send(compose(reminder, late), reminder.channel)
        except TimeoutError:
            sent = Sent(None, f"no answer within {SEND_TIMEOUT:g} s")
        attempt = reminder.attempts + 1
        give_up = sent.error is not None and attempt >= MAX_ATTEMPTS
        following = None
        if reminder.rrule and (sent.error is None or give_up):
            following = next_occurrence(
                reminder.rrule, reminder.first_due_at, reminder.time_zone, max(now, due)
            )
        if sent.error is None:
            log.info("reminder %s delivered%s", reminder.id, " (late)" if late else "")
        else:
            log.warning(
                "reminder %s attempt %d via %s failed: %s",
                reminder.id,
                attempt,
                self._line.route,
                sent.error,
            )
        await self._store.record_attempt(
            reminder,
            late=late,
            error=sent.error,
            delivery_id=sent.delivery_id,
            next_due_at=following,
            retry_at=now + backoff(attempt),
            give_up=give_up,
        )
