"""The data browser: a butler's tables, their columns and rows, read-only.

Table names are looked up in the catalog of the butler's schema (never taken
from the request into SQL), and rows are paged in primary-key order.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, JsonValue

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok, page
from butlers.dashboard.errors import NotFound
from butlers.dashboard.pagination import Limit, Offset
from butlers.db.provision import quote_ident
from butlers.jsonutil import to_json

router = APIRouter(tags=["tables"])
CATALOG = """
SELECT c.relname AS name, c.reltuples::bigint AS estimated_rows,
       coalesce((SELECT array_agg(a.attname ORDER BY array_position(i.indkey, a.attnum))
                 FROM pg_index i JOIN pg_attribute a
                   ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
                 WHERE i.indrelid = c.oid AND i.indisprimary), '{}') AS primary_key,
       (SELECT json_agg(json_build_object('name', a.attname,
                'type', format_type(a.atttypid, a.atttypmod), 'nullable', NOT a.attnotnull)
                ORDER BY a.attnum)
        FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
         AS columns
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
  AND c.relname NOT LIKE 'alembic_version_%'
ORDER BY c.relname
"""


class Column(BaseModel):
    name: str
    type: str
    nullable: bool


class TableInfo(BaseModel):
    name: str
    estimated_rows: int  # the planner's estimate (0 for a table never analyzed)
    # Rows counted up to COUNT_BOUND (`row_count_exact`), else the larger of the bound
    # and the planner's estimate.
    row_count: int
    row_count_exact: bool
    primary_key: list[str]
    columns: list[Column]


# Tables are counted exactly up to this many rows (one bounded scan each, in one
# statement); bigger ones show the planner's estimate, which is then meaningful.
COUNT_BOUND = 10_000


async def _tables(dashboard: Dashboard, name: str) -> dict[str, TableInfo]:
    rows = await dashboard.db.fetch(name, CATALOG)
    return {
        r["name"]: TableInfo(
            name=r["name"],
            estimated_rows=max(0, r["estimated_rows"]),
            row_count=max(0, r["estimated_rows"]),
            row_count_exact=False,
            primary_key=list(r["primary_key"]),
            columns=[Column(**c) for c in r["columns"] or []],
        )
        for r in rows
    }


async def _count(dashboard: Dashboard, name: str, tables: dict[str, TableInfo]) -> None:
    """Each table's rows, counted up to COUNT_BOUND (the planner's estimate is -1 or 0
    until the table is first analyzed, and stale after bursts of writes)."""
    if not tables:
        return
    names = list(tables)
    counts = ", ".join(
        f"(SELECT count(*) FROM (SELECT 1 FROM {quote_ident(t)} LIMIT {COUNT_BOUND + 1}) b)"
        for t in names
    )
    row = await dashboard.db.fetchrow(name, f"SELECT ARRAY[{counts}]::bigint[] AS counts")
    for table, counted in zip(names, row["counts"] if row else [], strict=False):
        info = tables[table]
        if counted <= COUNT_BOUND:
            info.row_count, info.row_count_exact = int(counted), True
        else:
            info.row_count = max(info.estimated_rows, COUNT_BOUND + 1)


@router.get("/api/butlers/{name}/tables", response_model=ApiResponse[list[TableInfo]])
async def list_tables(name: str, dashboard: Ctx) -> dict[str, Any]:
    """The tables of the butler's schema (core and its modules'), with their row counts."""
    dashboard.butler(name)
    tables = await _tables(dashboard, name)
    await _count(dashboard, name, tables)
    return ok(list(tables.values()))


@router.get(
    "/api/butlers/{name}/tables/{table}", response_model=PaginatedResponse[dict[str, JsonValue]]
)
async def table_rows(
    name: str, table: str, dashboard: Ctx, offset: Offset = 0, limit: Limit = 50
) -> dict[str, Any]:
    """Rows of one table in primary-key order (JSON values; long texts are not cut)."""
    dashboard.butler(name)
    info = (await _tables(dashboard, name)).get(table)
    if info is None:
        raise NotFound(f"butler {name!r} has no table {table!r}", butler=name)
    relation = quote_ident(info.name)
    order = ", ".join(quote_ident(c) for c in info.primary_key) or "1"
    total = await dashboard.db.fetchrow(name, f"SELECT count(*) FROM {relation}")
    rows = await dashboard.db.fetch(
        name, f"SELECT * FROM {relation} ORDER BY {order} OFFSET {offset} LIMIT {limit}"
    )
    return page(
        [to_json(_plain(dict(r))) for r in rows],
        total=int(total[0]) if total else 0,
        offset=offset,
        limit=limit,
    )


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """Values `to_json` does not know (arrays of other types, intervals) as text."""
    result = {}
    for key, value in row.items():
        try:
            to_json(value)
            result[key] = value
        except TypeError:
            result[key] = str(value)
    return result
