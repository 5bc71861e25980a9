"""The one redaction policy: secrets, credential-named keys and declared sensitive arguments."""

from __future__ import annotations

import logging

from butlers.redaction import MASK, MAX_WALK_DEPTH, TOO_DEEP, RedactingFilter, Redactor


def test_secrets_are_masked_in_nested_values() -> None:
    redactor = Redactor(["sk-abc123", None, ""])
    value = {"arguments": {"token": "sk-abc123", "list": ["x sk-abc123 y", 3]}, "sk-abc123": 1}
    assert redactor.value(value) == {
        "arguments": {"token": MASK, "list": [f"x {MASK} y", 3]},
        MASK: 1,
    }


def test_short_values_are_not_treated_as_secrets() -> None:
    assert Redactor(["ab"]).text("abc") == "abc"


def test_log_records_are_masked() -> None:
    record = logging.LogRecord("n", logging.INFO, "f", 1, "key=%s", ("sk-abc123",), None)
    RedactingFilter(Redactor(["sk-abc123"])).filter(record)
    assert record.getMessage() == f"key={MASK}"


def test_tracebacks_in_log_records_are_masked() -> None:
    try:
        raise ValueError("bad key sk-abc123")
    except ValueError:
        import sys

        record = logging.LogRecord("n", logging.ERROR, "f", 1, "failed", None, sys.exc_info())
    RedactingFilter(Redactor(["sk-abc123"])).filter(record)
    assert "sk-abc123" not in (record.exc_text or "") and MASK in (record.exc_text or "")


def test_known_secret_values_are_masked_anywhere() -> None:
    value = {"note": "my key is sk-secret-123", "items": ["sk-secret-123"], "token": "x"}
    assert Redactor(["sk-secret-123"]).value(value) == {
        "note": f"my key is {MASK}",
        "items": [MASK],
        "token": MASK,
    }


def test_credential_named_keys_are_masked_at_any_depth() -> None:
    value = {"login": {"user": "ann", "Password": "p", "apiKey": "k"}, "list": [{"token": 1}]}
    assert Redactor().value(value) == {
        "login": {"user": "ann", "Password": MASK, "apiKey": MASK},
        "list": [{"token": MASK}],
    }


def test_declared_sensitive_arguments_are_masked_only_for_their_tool() -> None:
    redactor = Redactor(sensitive_args={"contact_update": ["email"]})
    assert redactor.arguments("contact_update", {"email": "a@b.c", "name": "Ann"}) == {
        "email": MASK,
        "name": "Ann",
    }
    assert redactor.arguments("contact_add", {"email": "a@b.c"}) == {"email": "a@b.c"}
    assert redactor.value({"email": "a@b.c"}) == {"email": "a@b.c"}


def test_session_tool_calls_are_recorded_like_spans() -> None:
    redactor = Redactor(["sk-secret-123"], sensitive_args={"login": ["user"]})
    calls = [
        {
            "name": "login",
            "arguments": {"user": "ann", "password": "hunter2"},
            "result": "welcome, key sk-secret-123",
            "is_error": False,
        }
    ]
    assert redactor.tool_calls(calls) == [
        {
            "name": "login",
            "arguments": {"user": MASK, "password": MASK},
            "result": f"welcome, key {MASK}",
            "is_error": False,
        }
    ]


def test_values_nested_past_the_walk_depth_are_recorded_as_too_deep() -> None:
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    walked = Redactor(["s3cret"]).arguments("t", {"value": deep, "note": "s3cret"})
    assert walked["note"] == "[REDACTED]"
    inner = walked["value"]
    for _ in range(MAX_WALK_DEPTH - 1):
        inner = inner[0]
    assert inner == TOO_DEEP
