"""Listing a module's table across the butlers that enable it: one merged, exact page."""

from __future__ import annotations

import asyncio
from typing import Any

from butlers.dashboard.context import Dashboard
from butlers.dashboard.envelopes import page
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
    where = where or Where()
    order = order_sql or f"{order_key} DESC, id DESC"
    counts, rows = await asyncio.gather(
        dashboard.db.fan_out(
            f"SELECT count(*) FROM {table}{where.sql()}", *where.args, butler_names=names
        ),
        dashboard.db.fan_out(
            f"SELECT {columns} FROM {table}{where.sql()} ORDER BY {order} LIMIT {offset + limit}",
            *where.args,
            butler_names=names,
        ),
    )
    items = sorted(
        ({**row_json(r), "butler": n} for n, r in rows.rows()),
        key=lambda item: (str(item[order_key]), str(item["id"])),
        reverse=True,
    )
    total = sum(int(r[0]["count"]) for r in counts.results.values() if r)
    failed = sorted(set(counts.failed_butlers) | set(rows.failed_butlers))
    return page(
        items[offset : offset + limit],
        total=total,
        offset=offset,
        limit=limit,
        failed_butlers=failed,
    )
