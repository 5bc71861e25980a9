"""Bounded pages for every list tool: an opaque cursor, a maximum count and size.

A list tool answers `{"items": [...], "next_cursor": str | null}`: at most `limit`
items (never more than `MAX_PAGE`) and about `PAGE_BYTES` of JSON (always at least
one item), in a fixed order (`tools/state.py`). Passing `next_cursor` back continues after the last
item; `null` means the list is complete. A cursor is the position (the sort key) of
the last item, encoded; it is opaque to callers and checked when it comes back.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from butlers.jsonutil import to_json

DEFAULT_PAGE = 50
MAX_PAGE = 500
PAGE_BYTES = 1024 * 1024  # JSON bytes of one page, about (the last item may cross it)

Limit = Annotated[
    int, Field(ge=1, le=MAX_PAGE, description=f"Items per page (at most {MAX_PAGE}).")
]
Cursor = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=4096,
        description="`next_cursor` of the previous page; omit for the first page.",
    ),
]


class CursorError(ValueError):
    """A cursor this list did not hand out."""


def encode_token(value: Any) -> str:
    """Any JSON value as an opaque cursor (base64url, unpadded): the one cursor codec of
    the list tools and the dashboard."""
    text = json.dumps(to_json(value), separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_token(cursor: str) -> Any:
    """The JSON value of a cursor made by `encode_token`; CursorError otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return json.loads(raw.decode())
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise CursorError(
            "cursor is not a next_cursor this list returned; omit it to start over"
        ) from None


def encode_cursor(position: Sequence[Any]) -> str:
    return encode_token(list(position))


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    """The position a cursor holds; CursorError names the problem."""
    position = decode_token(cursor)
    if not isinstance(position, list) or len(position) != arity:
        raise CursorError("cursor is not a next_cursor this list returned; omit it to start over")
    if any(isinstance(p, str) and "\x00" in p for p in position):
        raise CursorError("cursor is not a next_cursor this list returned; omit it to start over")
    return position
