"""Bearer tokens: minting, and checking them in constant time without any I/O.

Three kinds, told apart by prefix:

- `bu_…`: a user token (full access; the one `ecosystem.json` records). Butlers keep
  only its SHA-256 digest.
- `bb_<name>.<hex>`: butler `name`'s own token, an HMAC of its name under the
  ecosystem's registration key. The switchboard holds that key, so it verifies any
  butler's token without a list of them, and a butler added later needs no restart
  of the switchboard; other butlers keep only the digest of the switchboard's token.
- `bs_…`: a session token the butler mints for one LLM session (the claude-code
  adapter's HTTP connection to its own butler) and forgets when the session ends.

Verification hashes the presented token (SHA-256) and looks the digest up (a digest
of a guess reveals nothing about stored tokens, so the lookup's timing leaks nothing);
a butler token's HMAC is recomputed and compared with `hmac.compare_digest`. No token
is ever logged: identities carry labels, never tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

from butlers.auth.identity import Identity, butler, session, user

# SHA-256 as CPython builds it in (what `hashlib` falls back to): the same digest in
# about half the time of OpenSSL's per request (no EVP context per call).
try:
    from _sha256 import sha256 as _sha256  # Python 3.11
except ImportError:  # pragma: no cover (3.12 and later)
    try:
        from _sha2 import sha256 as _sha256
    except ImportError:
        from hashlib import sha256 as _sha256

USER_PREFIX = "bu_"
BUTLER_PREFIX = "bb_"
SESSION_PREFIX = "bs_"
_BUTLER_TOKEN = re.compile(r"^bb_([a-z]([a-z0-9-]{0,61}[a-z0-9])?)\.([0-9a-f]{64})$")
MAX_TOKEN_LENGTH = 512
VERIFIED_KEPT = 4096  # butler tokens whose HMAC was checked, by digest


def new_secret() -> str:
    """A random 256-bit secret (a registration key)."""
    return secrets.token_hex(32)


def new_user_token() -> str:
    return USER_PREFIX + secrets.token_urlsafe(32)


def butler_token(registration_key: str, name: str) -> str:
    """Butler `name`'s token under `registration_key` (deterministic: re-derivable)."""
    return f"{BUTLER_PREFIX}{name}.{_butler_mac(registration_key, name)}"


def digest(token: str) -> str:
    """The SHA-256 hex digest butlers keep instead of a token."""
    hexdigest: str = _sha256(token.encode()).hexdigest()
    return hexdigest


def _butler_mac(key: str, name: str) -> str:
    return hmac.new(key.encode(), b"butler-token:" + name.encode(), hashlib.sha256).hexdigest()


class TokenBook:
    """Everything one butler knows to tell callers apart, held in memory."""

    def __init__(
        self,
        *,
        user_digests: Mapping[str, str] | None = None,
        switchboard_digest: str | None = None,
        registration_key: str | None = None,
    ) -> None:
        self._static: dict[str, Identity] = {
            value: user(label) for value, label in (user_digests or {}).items()
        }
        self._switchboard_digest = switchboard_digest
        self._registration_key = registration_key
        self._sessions: dict[str, Identity] = {}
        self._verified: dict[str, Identity] = {}  # butler tokens already checked

    def verify(self, token: str) -> Identity | None:
        """The identity a presented token proves, or None."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        presented = digest(token)
        if token.startswith(BUTLER_PREFIX):
            return self._verify_butler(token, presented)
        table = self._sessions if token.startswith(SESSION_PREFIX) else self._static
        return _lookup(table, presented)

    def _verify_butler(self, token: str, presented: str) -> Identity | None:
        known = self._verified.get(presented)
        if known is not None:
            return known
        identity = self._check_butler(token, presented)
        if identity is not None:
            if len(self._verified) >= VERIFIED_KEPT:
                self._verified.clear()
            self._verified[presented] = identity
        return identity

    def _check_butler(self, token: str, presented: str) -> Identity | None:
        match = _BUTLER_TOKEN.match(token)
        if match is None:
            return None
        name, mac = match.group(1), match.group(3)
        if self._registration_key is not None:
            expected = _butler_mac(self._registration_key, name)
            if hmac.compare_digest(expected, mac):
                router = self._switchboard_digest is not None and hmac.compare_digest(
                    presented, self._switchboard_digest
                )
                return butler(name, router=router)
            return None
        if self._switchboard_digest is not None and hmac.compare_digest(
            presented, self._switchboard_digest
        ):
            return butler(name, router=True)
        return None

    # -- session tokens ----------------------------------------------------------------

    def issue_session(self, session_id: str, *, tools: bool = True) -> str:
        """A token that identifies one LLM session of this butler until revoked."""
        token = SESSION_PREFIX + secrets.token_urlsafe(32)
        self._sessions[digest(token)] = session(session_id, tools=tools)
        return token

    def revoke(self, token: str) -> None:
        self._sessions.pop(digest(token), None)

    @property
    def session_count(self) -> int:
        return len(self._sessions)


def _lookup(table: Mapping[str, Identity], presented: str) -> Identity | None:
    """The digest of a guess says nothing about a stored token (no preimages), so a
    dict lookup by digest leaks nothing by its timing."""
    return table.get(presented)
