"""Reading the JSON-lines span files butlers write when `BUTLERS_SPAN_DIR` is set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
