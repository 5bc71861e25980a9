"""A butler's status verdict, and grouping of error messages."""

from __future__ import annotations

from butlers.dashboard.monitor import ButlerHealth, _verdict
from butlers.dashboard.routers.issues import normalize_error


def test_every_failed_module_degrades_a_butler_and_is_named_in_the_reason() -> None:
    credentials = {"name": "telegram", "status": "failed", "phase": "credentials", "error": "x"}
    startup = {"name": "email", "status": "failed", "phase": "startup", "error": "boom"}
    active = {"name": "memory", "status": "active", "phase": None, "error": None}
    assert _verdict(200, ButlerHealth(modules=[active])) == ("ok", None)
    assert _verdict(200, ButlerHealth(modules=[credentials])) == (
        "degraded",
        "module telegram failed (credentials): x",
    )
    status, reason = _verdict(200, ButlerHealth(modules=[credentials, startup, active]))
    assert status == "degraded" and "email" in str(reason) and "telegram" in str(reason)
    assert "memory" not in str(reason)


def test_a_module_the_owner_switched_off_does_not_degrade_a_butler() -> None:
    off = {"name": "health", "status": "disabled", "phase": None, "source": "runtime"}
    assert _verdict(200, ButlerHealth(modules=[off])) == ("ok", None)


def test_not_ready_is_degraded_with_the_ready_detail() -> None:
    health = ButlerHealth(ready={"status": "not_ready", "database": "unreachable: refused"})
    assert _verdict(503, health) == ("degraded", "not ready (database: unreachable: refused)")


def test_error_messages_group_without_ids_and_numbers() -> None:
    a = normalize_error("session 0a1b2c3d-0000-4000-8000-000000000001 timed out after 30 s")
    b = normalize_error("session 9f9f9f9f-1111-4111-8111-111111111111 timed out after 45 s")
    assert a == b == "session … timed out after … s"
