"""Who is signed in to the dashboard: one-time login codes, server-side sessions and
the per-client throttle of failed attempts.

- A login code is `<expires>.<nonce>.<hmac>`, signed with the login secret (the
  dashboard's token; in a local ecosystem the user's token). Whoever holds the secret
  mints codes (`butlers up`, `butlers dashboard --open`); the dashboard redeems each
  once, before it expires, for a session cookie.
- A session is a random id held here (its digest, never the id itself): the cookie
  carries the id, logout forgets it, so a copied cookie stops working at once.
- Every failed attempt (a wrong token, a bad or used code, a wrong bearer) counts
  against the client's address; past `FREE_FAILURES` the client waits 1, 2, 4 ...
  seconds (at most `MAX_DELAY`) before its next attempt is even looked at.

Pure Python (the CLI imports `login_code` without the web stack).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

CODE_SECONDS = 600  # a printed login link works for ten minutes, once
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 1000
MAX_CODES = 10_000
FREE_FAILURES = 3
MAX_DELAY = 120.0
MAX_CLIENTS = 10_000


def _sign(secret: str, message: str) -> str:
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def login_code(secret: str, *, seconds: int = CODE_SECONDS, now: float | None = None) -> str:
    """A one-time login code for the dashboard that knows `secret`."""
    expires = int((now or time.time()) + seconds)
    nonce = secrets.token_urlsafe(12)
    return f"{expires}.{nonce}.{_sign(secret, f'login.{expires}.{nonce}')}"


def login_url(base_url: str, secret: str) -> str:
    """The dashboard's one-time login link (`base_url` ends with `/`)."""
    return f"{base_url}login?code={login_code(secret)}"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True)
class Session:
    identity: str
    label: str  # the first characters of the id's digest: names the session in the audit
    expires: float
    client: str | None


class Throttle:
    """Failed attempts per client, with an exponential back-off."""

    def __init__(self, free: int = FREE_FAILURES, max_delay: float = MAX_DELAY) -> None:
        self.free = free
        self.max_delay = max_delay
        self._failures: dict[str, tuple[int, float]] = {}  # client -> (count, blocked until)

    def retry_after(self, client: str, now: float | None = None) -> float:
        """Seconds this client must still wait before an attempt (0: it may try)."""
        _count, until = self._failures.get(client, (0, 0.0))
        return max(0.0, until - (now or time.monotonic()))

    def failed(self, client: str, now: float | None = None) -> float:
        """Count a failure; the delay the client now has to wait."""
        now = now or time.monotonic()
        count = self._failures.get(client, (0, 0.0))[0] + 1
        delay = 0.0 if count <= self.free else min(2.0 ** (count - self.free - 1), self.max_delay)
        if len(self._failures) >= MAX_CLIENTS and client not in self._failures:
            self._prune(now)
        self._failures[client] = (count, now + delay)
        return delay

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)

    def _prune(self, now: float) -> None:
        idle = [c for c, (_n, until) in self._failures.items() if until + self.max_delay < now]
        for client in idle or list(self._failures)[: MAX_CLIENTS // 10]:
            del self._failures[client]


class Logins:
    """Sessions and redeemed codes of one dashboard process."""

    def __init__(self, session_seconds: float = SESSION_SECONDS) -> None:
        self.session_seconds = session_seconds
        self._sessions: dict[str, Session] = {}
        self._used_codes: dict[str, float] = {}  # nonce -> expiry
        self.throttle = Throttle()

    # -- codes --------------------------------------------------------------------

    def redeem(self, secret: str, code: str, now: float | None = None) -> str | None:
        """None when `code` is valid and unused (it is now used); else why not."""
        now = now or time.time()
        try:
            expires_text, nonce, signature = code.split(".", 2)
            expires = int(expires_text)
        except ValueError:
            return "that is not a login code"
        expected = _sign(secret, f"login.{expires}.{nonce}")
        if not hmac.compare_digest(expected, signature):
            return "that login code is not valid"
        if expires < now:
            return "that login link has expired"
        self._forget_used(now)
        if nonce in self._used_codes:
            return "that login link was already used"
        if len(self._used_codes) >= MAX_CODES:
            return "too many login links in use; wait a few minutes"
        self._used_codes[nonce] = expires
        return None

    def _forget_used(self, now: float) -> None:
        for nonce in [n for n, e in self._used_codes.items() if e < now]:
            del self._used_codes[nonce]

    # -- sessions -----------------------------------------------------------------

    def open(self, identity: str, client: str | None, now: float | None = None) -> str:
        """A new session; returns the id the cookie carries."""
        now = now or time.time()
        if len(self._sessions) >= MAX_SESSIONS:
            self._prune(now)
        session_id = secrets.token_urlsafe(32)
        key = _digest(session_id)
        self._sessions[key] = Session(identity, key[:8], now + self.session_seconds, client)
        return session_id

    def get(self, session_id: str | None, now: float | None = None) -> Session | None:
        if not session_id:
            return None
        key = _digest(session_id)
        session = self._sessions.get(key)
        if session is None:
            return None
        if session.expires < (now or time.time()):
            del self._sessions[key]
            return None
        return session

    def close(self, session_id: str | None) -> bool:
        return bool(session_id) and self._sessions.pop(_digest(session_id or ""), None) is not None

    def _prune(self, now: float) -> None:
        for key in [k for k, s in self._sessions.items() if s.expires < now]:
            del self._sessions[key]
        while len(self._sessions) >= MAX_SESSIONS:  # the oldest go first
            oldest = min(self._sessions, key=lambda k: self._sessions[k].expires)
            del self._sessions[oldest]
