"""What a module shows on the dashboard, as data: no FastAPI, no MCP.

A module's store declares its reads as `Listing`s (table, record, order, filter
clauses: the store stays the one home of its SQL); its `views.py` lists `View`s
(path, listing, filter parameters, change source) and the dashboard mounts every
registered module's views, derives each response model from the listing's record
and runs the listing on its read-only pool of every butler enabling the module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from butlers.db.sql import like_contains
from butlers.stores.records import Record


class Reader(Protocol):
    """What a read needs of a pool (an `asyncpg.Pool` is one)."""

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...


@dataclass(frozen=True)
class Clause:
    """One filter's SQL: `{}` for each use of its value. `contains` matches text literally
    (the value becomes an escaped `%…%` pattern; say `ESCAPE '\\'`)."""

    sql: str
    match: Literal["equals", "contains", "any"] = "equals"

    def values(self, value: Any) -> list[Any]:
        bound = like_contains(value) if self.match == "contains" else value
        return [bound] * self.sql.count("{}")


@dataclass(frozen=True)
class Listing:
    """A read of a module's table for the dashboard: rows as `record`s, newest first.

    `record.columns()` is the SELECT list; `order_sql` orders each butler's part and
    `order_key` (a record field) merges the parts (newest first unless `oldest_first`).
    `paged=False` reads the whole (small, bounded) table of each butler."""

    table: str
    record: type[Record]
    order_key: str
    order_sql: str
    clauses: Mapping[str, Clause] = field(default_factory=dict)
    paged: bool = True
    oldest_first: bool = False
    limit: int = 1000  # rows per butler of an unpaged listing

    def where(self, filters: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """` WHERE …` (or "") and its arguments, for the filters given (None: absent)."""
        parts: list[str] = []
        args: list[Any] = []
        for name, clause in self.clauses.items():
            value = filters.get(name)
            if value is None or value == "":
                continue
            placeholders = []
            for bound in clause.values(value):
                args.append(bound)
                placeholders.append(f"${len(args)}")
            parts.append(clause.sql.format(*placeholders))
        return (" WHERE " + " AND ".join(parts) if parts else ""), args

    def count_sql(self, where: str) -> str:
        return f"SELECT count(*) FROM {self.table}{where}"

    def rows_sql(self, where: str, limit: int) -> str:
        return (
            f"SELECT {self.record.columns()} FROM {self.table}{where} "
            f"ORDER BY {self.order_sql} LIMIT {int(limit)}"
        )


@dataclass(frozen=True)
class Filter:
    """A query parameter of a view: its listing's clause of the same name reads it."""

    name: str
    description: str = ""
    choices: tuple[str, ...] = ()  # allowed values (an enum in the schema); () = any text
    max_length: int | None = None
    type: Any = str  # str, or bool (a flag)


@dataclass(frozen=True)
class Changes:
    """A table whose rows the dashboard's live feed follows (triggers publish ids).

    Each re-read row becomes the event its `status` names (`events`, else `default`),
    preceded by `start` (event, status) when the row is already past its start."""

    table: str
    id_column: str
    columns: str
    poll_where: str  # rows changed since $1 (a timestamp)
    events: Mapping[str, str]
    default: str
    start: tuple[str, str]
    # Columns whose change is news too, beside `status` (each distinct value is published).
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class View:
    """One dashboard route over a module's table.

    `kind`: "page" (a merged page across butlers, `PaginatedResponse`), "list" (every
    row of every butler, `ApiResponse[list]`), "detail" (one row of one butler by id:
    the path ends in `{butler}/{<id name>}`, answered by `read`)."""

    path: str
    model: str  # the response model's name (the OpenAPI schema's)
    listing: Listing | None = None
    filters: tuple[Filter, ...] = ()
    kind: Literal["page", "list", "detail"] = "page"
    summary: str = ""
    tag: str = ""
    read: Callable[[Reader, Any], Awaitable[Record | None]] | None = None
    record: type[Record] | None = None  # of a detail view
    what: str = "row"  # of a detail view: "no <what> <id> on butler …"
    field_types: Mapping[str, Any] = field(default_factory=dict)  # overrides, by field

    def row_record(self) -> type[Record]:
        record = self.record or (self.listing.record if self.listing else None)
        if record is None:
            raise ValueError(f"view {self.path} has neither a listing nor a record")
        return record
