"""One page of a table merged across butlers: an exact total and the right slice.

Each butler returns its first `offset + limit` rows in the page's order and its
count; the rows are merged on `sort_key`, and models are built for the page only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from butlers.dashboard.context import Dashboard
from butlers.dashboard.envelopes import page
from butlers.dashboard.sql import Where


async def merged_page(
    dashboard: Dashboard,
    names: Sequence[str],
    *,
    table: str,
    columns: str,
    order_sql: str,
    sort_key: Callable[[str, Any], Any],
    build: Callable[[str, Any], Any],
    offset: int,
    limit: int,
    where: Where | None = None,
    newest_first: bool = True,
) -> dict[str, Any]:
    where = where or Where()
    counts, rows = await asyncio.gather(
        dashboard.db.fan_out(
            f"SELECT count(*) FROM {table}{where.sql()}", *where.args, butler_names=names
        ),
        dashboard.db.fan_out(
            f"SELECT {columns} FROM {table}{where.sql()} ORDER BY {order_sql} "
            f"LIMIT {offset + limit}",
            *where.args,
            butler_names=names,
        ),
    )
    merged = sorted(rows.rows(), key=lambda item: sort_key(*item), reverse=newest_first)
    total = sum(int(r[0]["count"]) for r in counts.results.values() if r)
    return page(
        [build(name, row) for name, row in merged[offset : offset + limit]],
        total=total,
        offset=offset,
        limit=limit,
        failed_butlers=sorted(set(counts.failed_butlers) | set(rows.failed_butlers)),
    )
