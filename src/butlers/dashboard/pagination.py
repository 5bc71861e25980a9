"""Paging across butlers: limits, opaque keyset cursors, and merging sorted parts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Query

from butlers.dashboard.errors import ValidationFailed
from butlers.paging import CursorError, decode_token, encode_token

MAX_LIMIT = 500
MAX_OFFSET = 100_000

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")]
Offset = Annotated[
    int, Query(ge=0, le=MAX_OFFSET, description="Items to skip (see also `cursor`).")
]
Cursor = Annotated[
    str | None,
    Query(max_length=512, description="`meta.next_cursor` of the previous page (keyset)."),
]


def encode_cursor(**fields: Any) -> str:
    return encode_token(fields)


def decode_cursor(cursor: str, *required: str) -> dict[str, Any]:
    try:
        fields = decode_token(cursor)
    except CursorError:
        raise ValidationFailed(f"cursor {cursor[:40]!r} is not a cursor of this API") from None
    if not isinstance(fields, dict) or any(name not in fields for name in required):
        raise ValidationFailed(f"cursor {cursor[:40]!r} is not a cursor of this route")
    return fields


def cursor_time(fields: dict[str, Any], name: str = "t") -> datetime:
    try:
        return datetime.fromisoformat(str(fields[name]))
    except ValueError:
        raise ValidationFailed("cursor holds an invalid timestamp") from None


def cursor_position(fields: dict[str, Any]) -> int:
    position = fields.get("p", 0)
    if not isinstance(position, int) or position < 0:
        raise ValidationFailed("cursor holds an invalid position")
    return position
