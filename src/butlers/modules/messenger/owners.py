"""Where the owner receives messages, configured once.

The owner is configured on the switchboard (`spec.modules.switchboard.owner`: the
Telegram user ids and e-mail addresses whose messages start work); the messenger
reads that list from the switchboard (`owner_identity`, with its own token) and sends
there without an approval (a Telegram user's private chat with the bot has the user's
id). The messenger's own `owner` is for a messenger without a switchboard; given
beside one, it must say the same, or no recipient counts as the owner's (every
named send is held for approval) and each held send says why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from butlers.mcp_clients import EndpointUnavailable, McpError, ToolFailed

log = logging.getLogger(__name__)
CHANNELS = ("telegram", "email")
REFRESH_SECONDS = 60.0  # the switchboard's list is read again after this long
FETCH_TIMEOUT = 5.0

Fetch = Callable[[], Awaitable[Any]]
Normalize = Callable[[str, str], str]


class OwnerBook:
    def __init__(
        self, configured: dict[str, set[str]], fetch: Fetch | None, normalize: Normalize
    ) -> None:
        self._configured = configured
        self._fetch = fetch
        self._normalize = normalize
        self._known: dict[str, set[str]] | None = None
        self._read_at = -REFRESH_SECONDS
        self._problem: str | None = None
        self._lock = asyncio.Lock()

    async def destinations(self, channel: str) -> tuple[set[str], str | None]:
        """The owner's destinations on `channel`, and why there are none when a
        configuration problem leaves none."""
        if self._fetch is None:
            return self._configured.get(channel, set()), None
        await self._refresh()
        if self._known is None:
            return set(), self._problem
        board = self._known.get(channel, set())
        own = self._configured.get(channel, set())
        if own and own != board:
            return set(), disagreement(channel, own, board)
        return board, None

    async def _refresh(self) -> None:
        if time.monotonic() - self._read_at < REFRESH_SECONDS:
            return
        async with self._lock:
            if time.monotonic() - self._read_at < REFRESH_SECONDS:
                return
            assert self._fetch is not None
            try:
                async with asyncio.timeout(FETCH_TIMEOUT):
                    answer = await self._fetch()
                known = {
                    channel: {self._normalize(channel, str(v)) for v in answer.get(channel) or []}
                    for channel in CHANNELS
                }
            except (EndpointUnavailable, ToolFailed, McpError, OSError, TimeoutError) as exc:
                # Keep what was read last; without it nobody counts as the owner (held).
                self._problem = (
                    f"the owner list could not be read from the switchboard "
                    f"({exc.__class__.__name__}: {exc})"
                )[:500]
                log.warning("messenger: %s", self._problem)
                self._read_at = time.monotonic() - REFRESH_SECONDS + 5.0  # again in 5 s
                return
            except (AttributeError, ValueError) as exc:
                self._problem = f"the switchboard's owner list is unusable: {exc}"[:500]
                log.error("messenger: %s", self._problem)
                self._read_at = time.monotonic()
                return
            for channel in CHANNELS:
                own = self._configured.get(channel, set())
                if own and own != known[channel]:
                    log.error("messenger: %s", disagreement(channel, own, known[channel]))
            self._known, self._problem, self._read_at = known, None, time.monotonic()


def disagreement(channel: str, own: set[str], board: set[str]) -> str:
    return (
        f"the owner is configured twice and the two disagree: "
        f"spec.modules.messenger.owner.{channel} {sorted(own)} vs "
        f"spec.modules.switchboard.owner.{channel} {sorted(board)}; configure the owner "
        f"once, in spec.modules.switchboard.owner (the messenger reads it from there), "
        f"and remove spec.modules.messenger.owner"
    )
