"""The JSON codec of the MCP hot path: orjson when installed, else the standard library.

`loads` raises `ValueError` for anything either codec refuses (orjson also refuses
`NaN`: callers hand such bodies to a slower, more lenient path). orjson reads an
integer past 64 bits as a float, silently: a text with a run of 19 or more digits is
read by the standard library, which keeps every integer exact. `dumps` gives compact
UTF-8 bytes, falling back to the standard library for what orjson cannot encode
(integers past 64 bits).
"""

from __future__ import annotations

import json
import re
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover (a dependency; the fallback keeps it optional)
    orjson = None  # type: ignore[assignment]


_LONG_NUMBER = re.compile(rb"\d{19}")


def loads(data: bytes) -> Any:
    if orjson is not None and _LONG_NUMBER.search(data) is None:
        return orjson.loads(data)
    return json.loads(data)


def dumps(value: Any) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
