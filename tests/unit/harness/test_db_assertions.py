"""DbAssertion's four `expected` shapes, checked against rows a query returned."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.harness.scenario_run import db_assertion_problem
from tests.e2e.scenarios import DbAssertion


class Rows:
    """Stands in for an asyncpg pool: every query returns these rows."""

    def __init__(self, *rows: dict[str, Any]) -> None:
        self.rows = list(rows)

    async def fetch(self, query: str) -> list[dict[str, Any]]:
        return self.rows


async def check(rows: Rows, expected: Any) -> str | None:
    return await db_assertion_problem(rows, DbAssertion("b", "q", expected, "label"))  # type: ignore[arg-type]


async def test_int_needs_one_row_with_an_equal_count() -> None:
    assert await check(Rows({"count": 2}), 2) is None
    assert "count is 1, expected 2" in (await check(Rows({"count": 1}), 2) or "")
    assert "`count` column" in (await check(Rows({"n": 2}), 2) or "")
    assert "`count` column" in (await check(Rows({"count": 1}, {"count": 1}), 1) or "")


async def test_dict_needs_one_row_whose_columns_include_it() -> None:
    row = {"name": "Priya", "email": "p@example.com", "phone": None}
    assert await check(Rows(row), {"name": "Priya", "phone": None}) is None
    assert "columns differ" in (await check(Rows(row), {"name": "Tomás"}) or "")
    assert "<missing column>" in (await check(Rows(row), {"birthday": None}) or "")
    assert "expected one row, got 2" in (await check(Rows(row, row), {"name": "Priya"}) or "")


async def test_list_needs_exactly_these_rows_in_order() -> None:
    a, b = {"title": "Coffee beans"}, {"title": "Oat milk"}
    assert await check(Rows(a, b), [a, b]) is None
    assert "rows differ" in (await check(Rows(b, a), [a, b]) or "")
    assert "rows differ" in (await check(Rows(a, b), [a]) or "")


async def test_none_needs_no_rows() -> None:
    assert await check(Rows(), None) is None
    assert "expected no rows" in (await check(Rows({"title": "cat"}), None) or "")


async def test_bool_is_not_a_count() -> None:
    with pytest.raises(TypeError):
        await check(Rows({"count": 1}), True)
