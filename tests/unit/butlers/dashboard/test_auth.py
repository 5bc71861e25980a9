"""Login codes, server-side sessions, the throttle, redirects after login, Host names."""

from __future__ import annotations

import time

from butlers.dashboard.auth import _host_name, safe_next
from butlers.dashboard.logins import Logins, Throttle, login_code

SECRET = "t" * 32


def test_a_login_code_is_redeemed_once_before_it_expires() -> None:
    logins = Logins()
    code = login_code(SECRET)
    assert SECRET not in code
    assert logins.redeem(SECRET, code) is None
    assert logins.redeem(SECRET, code) == "that login link was already used"
    stale = login_code(SECRET, seconds=60, now=time.time() - 120)
    assert logins.redeem(SECRET, stale) == "that login link has expired"


def test_a_forged_or_foreign_login_code_is_refused() -> None:
    logins = Logins()
    code = login_code(SECRET)
    expires, nonce, signature = code.split(".")
    assert logins.redeem(SECRET, f"{int(expires) + 3600}.{nonce}.{signature}") is not None
    assert logins.redeem("u" * 32, code) == "that login code is not valid"
    assert logins.redeem(SECRET, "garbage") == "that is not a login code"
    assert logins.redeem(SECRET, code) is None, "the refusals did not use the real code up"


def test_a_closed_session_is_forgotten_server_side() -> None:
    logins = Logins()
    session_id = logins.open("alice", "127.0.0.1")
    session = logins.get(session_id)
    assert session is not None and session.identity == "alice"
    assert session.label not in session_id  # the audit names it without giving it away
    assert logins.close(session_id)
    assert logins.get(session_id) is None
    assert not logins.close(session_id)


def test_a_session_expires() -> None:
    logins = Logins(session_seconds=60)
    session_id = logins.open("alice", None, now=1000.0)
    assert logins.get(session_id, now=1059.0) is not None
    assert logins.get(session_id, now=1061.0) is None


def test_failures_back_off_exponentially_per_client() -> None:
    throttle = Throttle(free=3, max_delay=30)
    delays = [throttle.failed("10.0.0.1", now=100.0) for _ in range(9)]
    assert delays == [0, 0, 0, 1, 2, 4, 8, 16, 30]
    assert throttle.retry_after("10.0.0.1", now=110.0) == 20
    assert throttle.retry_after("10.0.0.2", now=110.0) == 0, "another client is not held back"
    throttle.succeeded("10.0.0.1")
    assert throttle.retry_after("10.0.0.1", now=110.0) == 0


def test_only_same_site_paths_are_redirect_targets() -> None:
    assert safe_next("/sessions?x=1") == "/sessions?x=1"
    for hostile in ("https://evil.example/", "//evil.example/", "javascript:alert(1)", None, ""):
        assert safe_next(hostile) == "/"


def test_host_names_without_ports() -> None:
    assert _host_name("127.0.0.1:40200") == "127.0.0.1"
    assert _host_name("localhost") == "localhost"
    assert _host_name("[::1]:40200") == "[::1]"
