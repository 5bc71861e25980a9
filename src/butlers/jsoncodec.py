"""The JSON codec of the MCP hot path: orjson when installed, else the standard library.

`loads` raises `ValueError` for anything either codec refuses (orjson also refuses
`NaN` and integers past 64 bits: callers hand such bodies to a slower, more lenient
path); `dumps` gives compact UTF-8 bytes, falling back to the standard library for
what orjson cannot encode (integers past 64 bits).
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover (a dependency; the fallback keeps it optional)
    orjson = None  # type: ignore[assignment]


def loads(data: bytes | str) -> Any:
    if orjson is not None:
        return orjson.loads(data)
    return json.loads(data)


def dumps(value: Any) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
