"""Replacing secret values (declared secret env vars, API keys) by "[REDACTED]"."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 4  # shorter values would mask ordinary text
# A key (or variable) whose name says it holds a credential.
SENSITIVE_KEY = re.compile(r"(pass(word)?|secret|token|api[_-]?key|credential|authorization)", re.I)


class Redactor:
    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(self._secrets)

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.update(secrets)

    def update(self, secrets: Iterable[str | None]) -> None:
        """Replace the secrets (a shared redactor learns new ones in place)."""
        # Longest first, so a secret containing another is masked whole.
        self._secrets = sorted(
            {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True
        )

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret masked, in keys and values."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


class RedactingFilter(logging.Filter):
    """Masks secrets in every log record passing through a handler."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._redactor:
            return True
        message = record.getMessage()
        masked = self._redactor.text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info:  # tracebacks can quote arguments: format once, then mask
            record.exc_text = self._redactor.text(_FORMATTER.formatException(record.exc_info))
            record.exc_info = None
        return True


_FORMATTER = logging.Formatter()


def install_log_redaction(redactor: Redactor) -> None:
    """Mask secrets on every handler: the root's and any a library attached to its logger."""
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for logger in loggers:
        for handler in logger.handlers:
            handler.addFilter(RedactingFilter(redactor))
