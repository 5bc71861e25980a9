"""Masking secret values in text, JSON values and log records."""

from __future__ import annotations

import logging

from butlers.redaction import MASK, RedactingFilter, Redactor


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
