"""Logging: one line per record, tagged with the butler (or component) name.

Every process of an ecosystem logs in the same shape, so one grep finds a
butler's errors across `<data-dir>/logs/*.log`:

- Libraries log through the same handler (FastMCP's own rich console handler is
  replaced), and their records about a failed call are one line: the exception's
  class, no traceback (a tool's own bugs are logged with their traceback by
  `daemon.guard`), no message text that could quote the caller's data.
- With a log file, the handler writes it with mode 0600 and rotates it at
  `max_bytes`, keeping `backups` old files; the process's stdout and stderr follow
  the current file, so a crash's last words land there too.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s [%(component)s] %(name)s: %(message)s"
MAX_LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 5
# Loggers of libraries that bring their own handlers: adopted into ours.
ADOPTED = ("fastmcp", "mcp", "uvicorn", "uvicorn.error")
QUIET = ("uvicorn.access", "httpx", "httpx2", "httpcore", "mcp.server.streamable_http", "alembic")


class _ComponentFilter(logging.Filter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def filter(self, record: logging.LogRecord) -> bool:
        record.component = self.component
        return True


class _OneLineLibraryErrors(logging.Filter):
    """A library's record with a traceback becomes one line naming the exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.name.startswith("butlers"):
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(exc).__name__})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file created 0600; stdout and stderr follow each new file."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, self.mode.replace("w", "a"), encoding=self.encoding)

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None and self.follow_std_streams:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(self.stream.fileno(), 1)
            os.dup2(self.stream.fileno(), 2)

    follow_std_streams = False


def configure_logging(
    component: str,
    level: str = "INFO",
    *,
    log_file: Path | None = None,
    max_bytes: int = MAX_LOG_BYTES,
    backups: int = LOG_BACKUPS,
) -> None:
    """Log to stderr, or to `log_file` (rotated; stdout/stderr redirected to it)."""
    handler: logging.Handler
    if log_file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        rotating = PrivateRotatingFileHandler(log_file, maxBytes=max_bytes, backupCount=backups)
        rotating.follow_std_streams = True
        assert rotating.stream is not None
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(rotating.stream.fileno(), 1)
        os.dup2(rotating.stream.fileno(), 2)
        handler = rotating
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_ComponentFilter(component))
    handler.addFilter(_OneLineLibraryErrors())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ADOPTED:
        adopted = logging.getLogger(name)
        adopted.handlers[:] = []
        adopted.propagate = True
    for noisy in QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
