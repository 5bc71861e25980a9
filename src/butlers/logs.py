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
- Records below WARNING logged on a running event loop (a butler's line per tool
  call, above all) are written on the loop's next turn, after whatever the current
  turn sends (`LoopDeferredHandler`): formatting and writing a line costs 10-20 us,
  which a tool call's answer then no longer waits for. Warnings and errors, records
  with a traceback and records logged off the loop are written at once, after any
  deferred ones, so the file keeps the order in which records were logged.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import stat
import sys
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s [%(component)s] %(name)s: %(message)s"
MAX_LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 5
MAX_DEFERRED = 1000  # records held for the loop's next turn, at most
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

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, self.mode.replace("w", "a"), encoding=self.encoding)

    def emit(self, record: logging.LogRecord) -> None:
        """`RotatingFileHandler.emit`, formatting the record once (the stock handler
        formats it twice and asks the file system three times per record): the size
        is the open file's, by one `fstat`; only a regular file is rotated."""
        try:
            line = self.format(record) + self.terminator
            if self.stream is None:
                self.stream = self._open()
            if self.maxBytes > 0:
                info = os.fstat(self.stream.fileno())
                if stat.S_ISREG(info.st_mode) and info.st_size + len(line) >= self.maxBytes:
                    self.doRollover()
                    if self.stream is None:
                        self.stream = self._open()
            self.stream.write(line)
            self.stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None and self.follow_std_streams:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(self.stream.fileno(), 1)
            os.dup2(self.stream.fileno(), 2)

    follow_std_streams = False


class LoopDeferredHandler(logging.Handler):
    """Hands records below WARNING, logged on a running event loop, to `target` on the
    loop's next turn (one flush per turn, in order); everything else at once, after the
    records still pending. The message is rendered when the record is logged (its
    arguments may change later); its time is the time it was logged. Pending records
    are written by `flush` and `close` too (`logging.shutdown` at exit), and at once when
    `MAX_DEFERRED` are held; a process killed outright loses at most the records of
    its last turn."""

    def __init__(self, target: logging.Handler) -> None:
        super().__init__()
        self.target = target
        self._pending: list[logging.LogRecord] = []
        self._scheduled: asyncio.AbstractEventLoop | None = None  # the loop that will write

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING and record.exc_info is None:
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                try:
                    record.msg, record.args = record.getMessage(), None
                except Exception:
                    self.handleError(record)
                    return
                self._pending.append(record)
                if len(self._pending) >= MAX_DEFERRED:  # a turn that logs without end
                    self._write_pending()
                elif self._scheduled is not loop:  # (a loop that stopped may never run it)
                    self._scheduled = loop
                    loop.call_soon(self._write_pending)
                return
        self._write_pending()
        self.target.handle(record)

    def addFilter(self, filter: Any) -> None:
        """Filters (the redaction of secrets) run on the target, when a record is written:
        off the loop's turn too."""
        self.target.addFilter(filter)

    def removeFilter(self, filter: Any) -> None:
        self.target.removeFilter(filter)

    def _write_pending(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._scheduled = None
            pending, self._pending = self._pending, []
            for record in pending:
                self.target.handle(record)

    def flush(self) -> None:
        self._write_pending()
        self.target.flush()

    def close(self) -> None:
        self._write_pending()
        self.target.close()
        super().close()


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
    # The format shows none of the caller's file, line, thread or process: not looked up
    # per record (the logging HOWTO's "Optimization"; ~1.6 us a record).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [LoopDeferredHandler(handler)]
    root.setLevel(level)
    for name in ADOPTED:
        adopted = logging.getLogger(name)
        adopted.handlers[:] = []
        adopted.propagate = True
    for noisy in QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
