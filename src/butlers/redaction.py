"""The one redaction policy of a butler: tool spans, session rows, approval rows and logs.

- Known secret values (secret-backed `spec.env` variables, runtime API keys) are
  replaced by "[REDACTED]" wherever they appear: in text, keys and values.
- A value under a key that names a credential (password, token, api key, secret,
  credential, authorization) is masked whole, at any depth.
- A tool's declared sensitive arguments (its `meta.sensitive_args`, and
  `spec.approvals.rules`) are masked in the records of its calls: spans and
  session rows. Approval rows keep them: they are what the approver decides on.

Redaction applies to what is recorded, never to what a tool receives.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "[REDACTED]"
# Values nested deeper are recorded as `TOO_DEEP` (tool arguments that deep are
# refused anyway, see `daemon.guard`): a record is made of any input without recursion
# running out.
MAX_WALK_DEPTH = 64
TOO_DEEP = "[nested too deep]"
MIN_SECRET_LENGTH = 4  # shorter values would mask ordinary text
# A key (or variable) whose name says it holds a credential.
SENSITIVE_KEY = re.compile(r"(pass(word)?|secret|token|api[_-]?key|credential|authorization)", re.I)


class Redactor:
    def __init__(
        self,
        secrets: Iterable[str | None] = (),
        sensitive_args: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._secrets: list[str] = []
        self.update(secrets)
        self._sensitive: dict[str, frozenset[str]] = {}
        self.declare_sensitive_args(sensitive_args or {})

    def update(self, secrets: Iterable[str | None]) -> None:
        """Replace the secrets (a shared redactor learns new ones in place)."""
        # Longest first, so a secret containing another is masked whole.
        self._secrets = sorted(
            {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(self._secrets)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def declare_sensitive_args(self, table: Mapping[str, Iterable[str]]) -> None:
        """Tool name → argument names to mask in records of that tool's calls."""
        self._sensitive = {tool: frozenset(names) for tool, names in table.items()}

    def sensitive_args(self, tool: str) -> frozenset[str]:
        return self._sensitive.get(tool, frozenset())

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value: secrets masked, credential-named keys' values masked."""
        return self._walk(value, frozenset())

    def arguments(self, tool: str, arguments: Any) -> Any:
        """The arguments of a call of `tool` as spans and session rows record them."""
        return self._walk(arguments, self.sensitive_args(tool))

    def tool_calls(self, calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """A session's tool calls `{name, arguments, result, ...}` as its row records them."""
        redacted = []
        for call in calls:
            name = str(call.get("name", ""))
            entry = {str(k): self.value(v) for k, v in call.items()}
            if "arguments" in call:
                entry["arguments"] = self.arguments(name, call["arguments"])
            redacted.append(entry)
        return redacted

    def _walk(self, item: Any, names: frozenset[str], depth: int = 0) -> Any:
        if isinstance(item, Mapping | list | tuple) and depth >= MAX_WALK_DEPTH:
            return TOO_DEEP
        if isinstance(item, Mapping):
            return {
                self.text(str(k)): (
                    MASK if _masked(str(k), names) else self._walk(v, names, depth + 1)
                )
                for k, v in item.items()
            }
        if isinstance(item, list | tuple):
            return [self._walk(v, names, depth + 1) for v in item]
        if isinstance(item, str):
            return self.text(item)
        return item


def _masked(key: str, names: frozenset[str]) -> bool:
    return key in names or SENSITIVE_KEY.search(key) is not None


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
