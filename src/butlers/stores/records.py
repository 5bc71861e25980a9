"""Typed rows: each store returns records, not dicts.

A record is a frozen dataclass whose fields are the columns the store selects, in
order (`columns()` is the SELECT list, so the two cannot drift apart). A field whose
value is an expression says so in its metadata:
`text: str = field(metadata=expression("left(text, 500)"))`. Tools turn records into
JSON with `jsonutil.to_json`, which reads dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Self

SQL = "sql"


def expression(sql: str) -> dict[str, str]:
    """`field` metadata of a record field selected as `sql AS <field name>`."""
    return {SQL: sql}


@dataclass(frozen=True, slots=True)
class Record:
    @classmethod
    def columns(cls) -> str:
        return ", ".join(
            f"{f.metadata[SQL]} AS {f.name}" if SQL in f.metadata else f.name for f in fields(cls)
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        return cls(**{f.name: row[f.name] for f in fields(cls)})
