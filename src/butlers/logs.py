"""Logging: one line per record, tagged with the butler (or component) name.

Every process of an ecosystem logs in the same shape, so one grep finds a
butler's errors across `<data-dir>/logs/*.log`.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s [%(component)s] %(name)s: %(message)s"


class _ComponentFilter(logging.Filter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def filter(self, record: logging.LogRecord) -> bool:
        record.component = self.component
        return True


def configure_logging(component: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_ComponentFilter(component))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("uvicorn.access", "httpx", "httpcore", "mcp.server.streamable_http", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
