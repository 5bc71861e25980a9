"""Listing a module's table across the butlers that enable it: one merged, exact page."""

from __future__ import annotations

from typing import Any

from butlers.dashboard.context import Dashboard
from butlers.dashboard.listing import merged_page
from butlers.dashboard.sql import Where, row_json


async def module_page(
    dashboard: Dashboard,
    module: str,
    *,
    table: str,
    columns: str,
    order_key: str,
    where: Where | None = None,
    offset: int,
    limit: int,
    butler: str | None = None,
    order_sql: str | None = None,
) -> dict[str, Any]:
    """Rows of `table` (newest `order_key` first) with a `butler` field, from every butler
    enabling `module` (or only `butler`)."""
    names = dashboard.with_module(module)
    if butler is not None:
        dashboard.butler(butler)
        names = [n for n in names if n == butler]
    return await merged_page(
        dashboard,
        names,
        table=table,
        columns=columns,
        order_sql=order_sql or f"{order_key} DESC, id DESC",
        sort_key=lambda _name, row: (row[order_key], str(row["id"])),
        build=lambda name, row: {**row_json(row), "butler": name},
        offset=offset,
        limit=limit,
        where=where,
    )
