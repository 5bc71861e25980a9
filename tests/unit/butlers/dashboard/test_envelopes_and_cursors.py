"""Envelopes (computed `has_more`) and keyset cursors."""

from __future__ import annotations

import pytest

from butlers.dashboard.envelopes import ErrorResponse, PaginationMeta, page
from butlers.dashboard.errors import ValidationFailed
from butlers.dashboard.pagination import cursor_position, decode_cursor, encode_cursor


@pytest.mark.parametrize(
    ("total", "offset", "limit", "more"), [(10, 0, 5, True), (10, 5, 5, False), (0, 0, 50, False)]
)
def test_has_more_is_offset_plus_limit_below_total(
    total: int, offset: int, limit: int, more: bool
) -> None:
    meta = PaginationMeta(total=total, offset=offset, limit=limit)
    assert meta.model_dump()["has_more"] is more


def test_a_page_body_carries_every_meta_field() -> None:
    body = page([1, 2], total=7, offset=2, limit=2, failed_butlers=["x"])
    dumped = body["meta"].model_dump()
    assert dumped | {"next_cursor": None} == {
        "total": 7,
        "offset": 2,
        "limit": 2,
        "has_more": True,
        "failed_butlers": ["x"],
        "supported": True,
        "reason": None,
        "next_cursor": None,
    }


def test_error_envelope_shape() -> None:
    body = {"error": {"code": "NOT_FOUND", "message": "m", "butler": None, "details": None}}
    assert ErrorResponse.model_validate(body).model_dump() == body


def test_a_cursor_round_trips_and_bad_ones_are_validation_errors() -> None:
    cursor = encode_cursor(t="2021-01-01T00:00:00+00:00", b="health", i="x", p=40)
    fields = decode_cursor(cursor, "t", "b", "i")
    assert fields["b"] == "health" and cursor_position(fields) == 40
    for bad in ("!!!", encode_cursor(t="x"), "e30"):
        with pytest.raises(ValidationFailed):
            decode_cursor(bad, "t", "b", "i")
    with pytest.raises(ValidationFailed):
        cursor_position({"p": -1})
