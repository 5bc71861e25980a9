"""The Google OAuth bootstrap's state: pending consents (CSRF states) and the last
failure, in this process's memory.

A state is `secrets.token_urlsafe(32)`, lives 10 minutes, is consumed by the first
callback that presents it, and remembers who started the flow, the redirect URI sent
to Google (the exchange must repeat it) and whether the caller wanted JSON. At most
`MAX_PENDING` flows wait at once; the oldest is dropped past that.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

STATE_TTL_SECONDS = 600.0
MAX_PENDING = 64


@dataclass(frozen=True)
class Pending:
    actor: str
    redirect_uri: str
    json: bool
    expires_at: float


@dataclass(frozen=True)
class Failure:
    state: str  # one of the status probe's states
    detail: str
    at: float


class OAuthFlows:
    def __init__(self, ttl: float = STATE_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._pending: OrderedDict[str, Pending] = OrderedDict()
        self.last_failure: Failure | None = None

    def start(self, actor: str, redirect_uri: str, json: bool) -> str:
        self._expire()
        while len(self._pending) >= MAX_PENDING:
            self._pending.popitem(last=False)
        state = secrets.token_urlsafe(32)
        self._pending[state] = Pending(actor, redirect_uri, json, time.monotonic() + self.ttl)
        return state

    def consume(self, state: str) -> Pending | None:
        """The flow `state` started, once; None when unknown, used or expired."""
        self._expire()
        return self._pending.pop(state, None)

    def fail(self, state: str, detail: str) -> None:
        self.last_failure = Failure(state, detail, time.time())

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, p in self._pending.items() if p.expires_at <= now]:
            del self._pending[key]
