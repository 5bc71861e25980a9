"""Session cookies, redirects after login, Host names."""

from __future__ import annotations

import time

from butlers.dashboard.auth import _host_name, safe_next, session_value, valid_session

TOKEN = "t" * 32


def test_a_session_value_is_valid_until_it_expires() -> None:
    expires = int(time.time()) + 60
    value = session_value(TOKEN, expires)
    assert valid_session(TOKEN, value)
    assert not valid_session(TOKEN, value, now=expires + 1)
    assert not valid_session("u" * 32, value), "another token's cookie is refused"
    assert TOKEN not in value


def test_a_tampered_session_value_is_refused() -> None:
    value = session_value(TOKEN, int(time.time()) + 60)
    version, expires, signature = value.split(".")
    longer = f"{version}.{int(expires) + 3600}.{signature}"
    assert not valid_session(TOKEN, longer)
    assert not valid_session(TOKEN, "garbage")
    assert not valid_session(TOKEN, "v2." + value[3:])


def test_only_same_site_paths_are_redirect_targets() -> None:
    assert safe_next("/sessions?x=1") == "/sessions?x=1"
    for hostile in ("https://evil.example/", "//evil.example/", "javascript:alert(1)", None, ""):
        assert safe_next(hostile) == "/"


def test_host_names_without_ports() -> None:
    assert _host_name("127.0.0.1:40200") == "127.0.0.1"
    assert _host_name("localhost") == "localhost"
    assert _host_name("[::1]:40200") == "[::1]"
