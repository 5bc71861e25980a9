"""Scratch directories an embedded PostgreSQL can use from tests and benchmarks."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory outside pytest's 0700 base (which pytest re-locks whenever a
    session starts): an embedded PostgreSQL running as another user must traverse it."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
